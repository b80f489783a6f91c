package site

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes each name -> content under dir (0600), making directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// firstRelease is an up data dir of the first release: its tokens in tokens/.
var firstRelease = map[string]string{
	"tokens/api.token":          "apitoken0123456789abcdef01234567\n",
	"tokens/infra-1.token":      "infratoken0123456789abcdef012345\n",
	"tokens/code-1.token":       "codetoken0123456789abcdef0123456\n",
	"tokens/orchestrator.token": "orchtoken0123456789abcdef0123456\n",
	"orchestrator/orch_id":      "01a21cc3-0000-7000-8000-000000000000\n",
}

// TestUpgradeDataDirKeepsTheFirstReleasesTokens: the API token and each agent's
// own token are carried into secrets/ under this release's names, the one
// orchestrator token is retired, tokens/ goes, the format is recorded, what was
// done is said without a token's value, and a second run does nothing.
func TestUpgradeDataDirKeepsTheFirstReleasesTokens(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, firstRelease)
	done, err := UpgradeDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(done, "\n")
	for _, want := range []string{"kept the API token: tokens/api.token is now secrets/api.token",
		"kept the agents' own tokens (code-1, infra-1)", "retired tokens/orchestrator.token", "removed tokens/"} {
		if !strings.Contains(said, want) {
			t.Errorf("Upgrade said:\n%s\nwant %q", said, want)
		}
	}
	for _, v := range firstRelease {
		if strings.Contains(said, strings.TrimSpace(v)) {
			t.Errorf("Upgrade's lines hold a token's value:\n%s", said)
		}
	}
	for from, to := range map[string]string{"api.token": APIToken, "infra-1.token": AgentToken("infra-1"), "code-1.token": AgentToken("code-1")} {
		if got := readFile(t, filepath.Join(dir, "secrets", to)); got != firstRelease["tokens/"+from] {
			t.Errorf("secrets/%s holds %q, want the first release's %s", to, got, from)
		}
		if fi, err := os.Stat(filepath.Join(dir, "secrets", to)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("secrets/%s: %v, mode %v; want 0600", to, err, fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets", "orchestrator.token")); err == nil {
		t.Error("the first release's orchestrator token was carried over")
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens")); !os.IsNotExist(err) {
		t.Errorf("tokens/ is still there: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "format")); got != "2\n" {
		t.Errorf("format file %q, want 2", got)
	}
	if done, err := UpgradeDataDir(dir); err != nil || done != nil {
		t.Errorf("a second upgrade: %q, %v; want nothing done", done, err)
	}
}

// TestUpgradeDataDirEdges: a new dir is only stamped; a token secrets/ holds is
// kept over tokens/'s; a newer or unreadable format is refused, the dir
// untouched.
func TestUpgradeDataDirEdges(t *testing.T) {
	t.Run("new", func(t *testing.T) {
		dir := t.TempDir()
		if done, err := UpgradeDataDir(dir); err != nil || done != nil {
			t.Fatalf("%q, %v", done, err)
		}
		if got := readFile(t, filepath.Join(dir, "format")); got != "2\n" {
			t.Errorf("format file %q", got)
		}
	})
	t.Run("secrets win", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, firstRelease)
		writeFiles(t, dir, map[string]string{"secrets/api.token": "newer0123456789abcdef0123456789ab\n"})
		if _, err := UpgradeDataDir(dir); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(dir, "secrets", APIToken)); got != "newer0123456789abcdef0123456789ab\n" {
			t.Errorf("secrets/api.token was replaced: %q", got)
		}
	})
	for _, tc := range []struct{ format, want string }{
		{"4\n", "written by a newer chiffon (format 4; this build reads up to 3)"},
		{"two\n", `format file holds "two\n", not a number`},
	} {
		t.Run("format "+strings.TrimSpace(tc.format), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, firstRelease)
			writeFiles(t, dir, map[string]string{"format": tc.format})
			_, err := UpgradeDataDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "tokens", "api.token")); err != nil {
				t.Errorf("a refused dir was changed: %v", err)
			}
		})
	}
}
