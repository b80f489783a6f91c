package site

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReadDataDirMode: a dir with nothing of a site is not made; a format 2
// dir, a first release's and one with only secrets/ are of NKey users; a
// format 3 dir is in operator mode; MarkDataDirOperator stamps a new dir only.
func TestReadDataDirMode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  DataDirMode
	}{
		{"empty", nil, DataDirMode{}},
		{"a log only", map[string]string{"chiffon.log": ""}, DataDirMode{}},
		{"format 2", map[string]string{"format": "2\n"}, DataDirMode{Made: true}},
		{"first release", firstRelease, DataDirMode{Made: true}},
		{"secrets only", map[string]string{"secrets/api.token": "x\n"}, DataDirMode{Made: true}},
		{"operator", map[string]string{"format": "3\n"}, DataDirMode{Made: true, Operator: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := ReadDataDirMode(dir)
			if err != nil || got != tc.want {
				t.Fatalf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "new")
	if err := MarkDataDirOperator(dir); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "format")); got != "3\n" {
		t.Errorf("format file %q, want 3", got)
	}
	if done, err := UpgradeDataDir(dir); err != nil || done != nil || readFile(t, filepath.Join(dir, "format")) != "3\n" {
		t.Errorf("UpgradeDataDir of an operator dir: %q, %v; want it left as it is", done, err)
	}
	nkey := t.TempDir()
	writeFiles(t, nkey, map[string]string{"format": "2\n"})
	if err := MarkDataDirOperator(nkey); err == nil || !strings.Contains(err.Error(), "already holds a site") {
		t.Errorf("MarkDataDirOperator of an NKey dir: %v", err)
	}
}
