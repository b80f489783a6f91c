package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readPid reads the pid a script wrote to path, and makes sure the process does
// not outlive the test.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	pid, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		t.Fatalf("pid in %s: %v %v", path, err, err2)
	}
	t.Cleanup(func() {
		if unix.Kill(pid, unix.SIGKILL) == nil {
			_, _ = unix.Wait4(pid, nil, 0, nil) // adopted by the test process
		}
	})
	return pid
}

// escape starts a process that leaves the task's process group and holds its
// stdout, and waits until it has written its pid to $PID.
const escape = `setsid sh -c 'echo $$ > "$PID"; exec sleep 300' &
while [ ! -s "$PID" ]; do :; done
`

func TestTaskEndKillsAndReapsEveryDescendant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		pids   []string // files the script writes pids to
		cancel bool     // cancel the task once it says "ready"
	}{
		{"cancel: a process left the group", escape + `echo ready; exec sleep 300`, []string{"PID"}, true},
		// Found through its parent, while the main process runs.
		{"cancel: a process left the group and cleared its environment",
			`setsid env -i PATH="$PATH" PID="$PID" sh -c 'echo $$ > "$PID"; exec sleep 300' &
while [ ! -s "$PID" ]; do :; done
echo ready; exec sleep 300`, []string{"PID"}, true},
		{"exit: a process left the group and holds stdout", escape + `echo done`, []string{"PID"}, false},
		{"exit: an orphan that has exited", `(sh -c 'echo $$ > "$PID"' &)
while [ ! -s "$PID" ]; do :; done
echo done`, []string{"PID"}, false},
		// The daemon's first process ($PID) has exited, and its parent too, which
		// did not wait for it: it is a zombie of the agent that no scan saw
		// running, found by the session its daemon is in.
		{"exit: a daemon that double forked", `sh -c 'setsid sh -c "$FIRST" & exec sleep 300' &
parent=$!
while [ ! -s "$PID" ] || [ ! -s "$DAEMON" ]; do :; done
read -r first < "$PID"
state=
while [ "$state" != Z ] && read -r _ _ state _ < /proc/$first/stat; do :; done
kill -9 $parent
while read -r _ _ _ ppid _ < /proc/$first/stat && [ "$ppid" = $parent ]; do :; done
echo done`, []string{"PID", "DAEMON"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{
				"FIRST":  `sh -c "$SECOND" & echo $$ > "$PID"`,
				"SECOND": `echo $$ > "$DAEMON"; exec sleep 300`,
			}
			for _, name := range tc.pids {
				env[name] = filepath.Join(dir, name)
			}
			rec := newOutputRecorder()
			var during func(context.CancelFunc)
			if tc.cancel {
				during = func(cancel context.CancelFunc) {
					rec.waitOutput(t, "ready")
					cancel()
				}
			}
			res, err := runScript(t, tc.script, env, rec, during)
			if tc.cancel != (err != nil) || !tc.cancel && (res.ExitCode != 0 || rec.String() != "done\n") {
				t.Fatalf("run: exit %d, %v; output %q", res.ExitCode, err, rec.String())
			}
			for _, name := range tc.pids {
				// ESRCH: neither running nor a zombie left unreaped.
				if pid := readPid(t, env[name]); unix.Kill(pid, 0) != unix.ESRCH {
					t.Errorf("%s %d is still there when the task has ended", name, pid)
				}
			}
		})
	}
}

func TestTaskEndDoesNotWaitForAProcessItCannotAttribute(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// Out of the tree, and with no CHIFFON_ variable left to say whose it is.
	script := `setsid env -i PATH="$PATH" PID="$PID" sh -c 'echo $$ > "$PID"; exec sleep 300' &
while [ ! -s "$PID" ]; do :; done
echo done`
	rec := newOutputRecorder()
	if res, err := runScript(t, script, map[string]string{"PID": pidFile}, rec, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: exit %d, %v", res.ExitCode, err)
	}
	if pid := readPid(t, pidFile); unix.Kill(pid, 0) != nil {
		t.Fatalf("the holder of stdout ended: run may have waited for the end of the pipe")
	}
	if got := rec.String(); got != "done\n" {
		t.Fatalf("output %q", got)
	}
}

func TestTaskEndLeavesOtherChildrenOfTheAgentToTheirOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		attr *syscall.SysProcAttr
	}{
		{"in the agent's group", nil},
		{"in a group of its own", &syscall.SysProcAttr{Setpgid: true}},
		{"in a session of its own", &syscall.SysProcAttr{Setsid: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A command of a Go handler, or of the program that embeds the agent:
			// it has exited, and os/exec has yet to wait for it.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command("/bin/sh", "-c", "exit 7")
			cmd.Stdout, cmd.SysProcAttr = w, tc.attr
			err = cmd.Start()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			_ = r.SetReadDeadline(time.Now().Add(testWait))
			if _, err := io.ReadAll(r); err != nil { // EOF: it has exited
				t.Fatal(err)
			}
			// A task whose end reaps a zombie of its own.
			pid := filepath.Join(t.TempDir(), "pid")
			if _, err := runScript(t, `(sh -c 'echo $$ > "$PID"' &)
while [ ! -s "$PID" ]; do :; done`, map[string]string{"PID": pid}, newOutputRecorder(), nil); err != nil {
				t.Fatal(err)
			}
			var exitErr *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
				t.Fatalf("the command's own wait: %v, want exit status 7", err)
			}
		})
	}
}

func TestProcessReadersAgree(t *testing.T) {
	if !hasChildrenFiles() {
		t.Skip("no /proc/<pid>/task/<tid>/children here: readProcs is the only reader")
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Wait()
	}()
	line := make([]byte, 32)
	n, err := out.Read(line) // the grandchild's pid, once it runs
	grandchild, err2 := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	all, err := readProcs()
	if err != nil {
		t.Fatal(err)
	}
	tree := readDescendants(os.Getpid(), nil)
	want := map[int]int{cmd.Process.Pid: os.Getpid(), grandchild: cmd.Process.Pid} // pid: parent
	for pid, parent := range want {
		if p, ok := tree[pid]; !ok || p != all[pid] || p.ppid != parent {
			t.Errorf("pid %d: readDescendants %+v, readProcs %+v, want parent %d", pid, tree[pid], all[pid], parent)
		}
	}
}
