package agent_test

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// otherUser returns "nobody" when the test runs as root and that user exists and
// is not root; otherwise it skips the test.
func otherUser(t *testing.T) *user.User {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		t.Skipf("switching users needs root; the test runs as uid %d", euid)
	}
	u, err := user.Lookup("nobody")
	if err != nil || u.Uid == "0" {
		t.Skipf("no non-root user nobody to switch to (%v)", err)
	}
	return u
}

// sharedTempDir is a temporary directory that every user may enter.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunAsUserCannotReadRootOnlyFile(t *testing.T) {
	nobody := otherUser(t)
	dir := sharedTempDir(t)
	files := map[string]struct {
		text string
		mode os.FileMode
	}{"secret": {"root only", 0o600}, "public": {"everyone", 0o644}}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.text+"\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	wt := agent.WorkTypeConfig{
		Shell:  `id -u; id -G; cat "$DIR/public"; cat "$DIR/secret"`,
		Env:    []string{"PATH"},
		SetEnv: map[string]string{"DIR": dir},
	}
	asNobody := wt
	asNobody.RunAs = "nobody"
	res := runTasks(t, map[string]agent.WorkTypeConfig{"as_agent": wt, "as_nobody": asNobody},
		taskRun{"as_agent", nil}, taskRun{"as_nobody", nil})

	if r := res[0]; r.Status != envelope.ResultSuccess || !strings.HasSuffix(r.Output, "everyone\nroot only\n") {
		t.Fatalf("without run_as: %s exit %d, output %q", r.Status, r.ExitCode, r.Output)
	}
	r := res[1]
	// stderr's line comes where the agent read it among stdout's: two pipes hold no
	// common order (docs/agent.md).
	var lines []string
	for _, l := range strings.Split(r.Output, "\n") {
		if !strings.Contains(l, "Permission denied") {
			lines = append(lines, l)
		}
	}
	if r.Status != envelope.ResultFailed || len(lines) < 4 || lines[0] != nobody.Uid ||
		lines[2] != "everyone" || strings.Contains(r.Output, "root only") || !strings.Contains(r.Output, "Permission denied") {
		t.Fatalf("run_as nobody: want uid %s reading only the public file, got %s exit %d, output %q",
			nobody.Uid, r.Status, r.ExitCode, r.Output)
	}
	groups, err := nobody.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	want, got := append(groups, nobody.Gid), strings.Fields(lines[1])
	slices.Sort(want)
	slices.Sort(got)
	if want, got = slices.Compact(want), slices.Compact(got); !slices.Equal(got, want) {
		t.Fatalf("run_as nobody: groups %v, want %v (gid and supplementary groups of nobody)", got, want)
	}
}
