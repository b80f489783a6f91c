package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/site"
)

// TestUpModeNeverConvertsADataDir: a new data dir takes --operator and records
// it; an existing one keeps its mode with --operator left out, and a contrary
// --operator is refused, naming the dir's mode and leaving it as it was.
func TestUpModeNeverConvertsADataDir(t *testing.T) {
	for _, tc := range []struct {
		name            string
		format          string // "" for a new dir
		operator, given bool
		want            bool
		wantFormat      string
		wantErr         string
	}{
		{name: "new", wantFormat: ""},
		{name: "new, --operator", operator: true, given: true, want: true, wantFormat: "3\n"},
		{name: "NKey", format: "2\n", wantFormat: "2\n"},
		{name: "NKey, --operator", format: "2\n", operator: true, given: true, wantFormat: "2\n",
			wantErr: "was made with NKey users, not in NATS operator mode"},
		{name: "NKey, --operator=false", format: "2\n", given: true, wantFormat: "2\n"},
		{name: "operator", format: "3\n", want: true, wantFormat: "3\n"},
		{name: "operator, --operator", format: "3\n", operator: true, given: true, want: true, wantFormat: "3\n"},
		{name: "operator, --operator=false", format: "3\n", given: true, wantFormat: "3\n",
			wantErr: "was made in NATS operator mode (up --operator)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.format != "" {
				if err := os.WriteFile(filepath.Join(dir, "format"), []byte(tc.format), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := site.SettleDataDirMode(dir, tc.operator, tc.given)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "never converts") {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("operator %t, %v; want %t", got, err, tc.want)
			}
			format, _ := os.ReadFile(filepath.Join(dir, "format"))
			if string(format) != tc.wantFormat {
				t.Errorf("format file %q, want %q", format, tc.wantFormat)
			}
		})
	}
}

// TestUpBannerSaysHowToAddAHost: in operator mode up prints the chiffon enroll
// line, and on loopback that a join needs --host; without it, neither.
func TestUpBannerSaysHowToAddAHost(t *testing.T) {
	for _, tc := range []struct {
		name          string
		operator, tls bool
		want, notWant []string
	}{
		{"NKey", false, false, nil, []string{"chiffon enroll", "operator mode"}},
		{"operator, loopback", true, false, []string{"chiffon enroll --type code --id <new-agent-id> --data-dir ", "a join needs the API over HTTPS"}, nil},
		{"operator, https", true, true, []string{"chiffon enroll --type code --id <new-agent-id> --data-dir "}, []string{"a join needs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			upBanner{natsURL: "tls://127.0.0.1:4222", apiURL: "https://127.0.0.1:8080", host: "127.0.0.1", dataDir: "d",
				logPath: "chiffon.log", operator: tc.operator, tls: tc.tls}.print(&out)
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("banner lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("banner has %q:\n%s", w, out.String())
				}
			}
		})
	}
}
