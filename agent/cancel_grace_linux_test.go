package agent_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// Scripts that write their pids ($MAIN, $CHILD in the process group, $ESCAPED in
// a session of its own) before they say "ready".
const (
	// trapsTERM cleans up on SIGTERM: each of its shells touches a marker and
	// exits 0, the escaped one after its main process. Each trap also SIGKILLs its
	// shell's sleep, which may have been forked too late to have SIGTERM.
	trapsTERM = `trap 'kill -KILL $s 2>/dev/null; touch "$MAIN.cleaned"; exit 0' TERM
sleep 300 & s=$!
echo $$ > "$MAIN"
sh -c 'trap "kill -KILL \$s 2>/dev/null; touch \"$CHILD.cleaned\"; exit 0" TERM; sleep 300 & s=$!; echo $$ > "$CHILD"; wait' &
setsid sh -c 'trap "kill -KILL \$s 2>/dev/null; sleep 0.2; touch \"$ESCAPED.cleaned\"; exit 0" TERM; sleep 300 & s=$!; echo $$ > "$ESCAPED"; wait' &
while [ ! -s "$CHILD" ] || [ ! -s "$ESCAPED" ]; do :; done
echo ready
wait`
	// ignoresTERM and its descendants, which inherit the ignored signal, run on.
	ignoresTERM = `trap '' TERM
echo $$ > "$MAIN"
sh -c 'echo $$ > "$CHILD"; exec sleep 300' &
setsid sh -c 'echo $$ > "$ESCAPED"; exec sleep 300' &
while [ ! -s "$CHILD" ] || [ ! -s "$ESCAPED" ]; do :; done
echo ready
exec sleep 300`
	// leavesTERMIgnorers exits on SIGTERM; its descendants ignore it.
	leavesTERMIgnorers = `trap 'touch "$MAIN.cleaned"; exit 3' TERM
echo $$ > "$MAIN"
sh -c 'trap "" TERM; echo $$ > "$CHILD"; exec sleep 300' &
setsid sh -c 'trap "" TERM; echo $$ > "$ESCAPED"; exec sleep 300' &
while [ ! -s "$CHILD" ] || [ ! -s "$ESCAPED" ]; do :; done
echo ready
wait`
)

// taskPids are the pid files the scripts write.
var taskPids = []string{"MAIN", "CHILD", "ESCAPED"}

// Ways a test ends a running task.
const (
	byCancel   = "cancel"
	byDeadline = "deadline" // max_duration_seconds 3: time to start under load
	byDrain    = "drain"    // the agent stops, with a drain timeout of 1ms
)

func graceOf(d time.Duration) *agent.Duration {
	g := agent.Duration(d)
	return &g
}

func TestCancelGraceTermsThenKillsTheTaskTree(t *testing.T) {
	// Ends of the output: the cause, then how the processes stopped. A group is
	// how long after SIGTERM they exited.
	const (
		cancelled = `\nchiffon: cancelled by the orchestrator: operator\n`
		term      = `chiffon: SIGTERM sent to the process group; `
		exited    = term + `it exited (\S+) later\n$`
		killed    = term + `still running after the 300ms cancel_grace: SIGKILLed\n$`
		mainOnly  = term + `its main process exited (\S+) later, the rest still ran after the 300ms cancel_grace: SIGKILLed\n$`
	)
	all := taskPids
	for _, tc := range []struct {
		name    string
		grace   *agent.Duration // nil: the default
		script  string
		by      string
		status  string
		exit    int64
		output  string   // a regexp of the end of the output
		killed  bool     // SIGKILLed after the grace
		cleaned []string // the processes whose TERM trap ran
	}{
		{"a task that exits on SIGTERM cleans up", graceOf(time.Minute), trapsTERM, byCancel,
			envelope.ResultCancelled, agent.ExitCancelled, cancelled + exited, false, all},
		{"the default grace lets a task clean up", nil, trapsTERM, byCancel,
			envelope.ResultCancelled, agent.ExitCancelled, cancelled + exited, false, all},
		{"a task past its deadline cleans up", graceOf(time.Minute), trapsTERM, byDeadline,
			envelope.ResultFailed, agent.ExitDeadline, `\nchiffon: deadline of 3s exceeded\n` + exited, false, all},
		{"a task that ignores SIGTERM is SIGKILLed after the grace", graceOf(300 * time.Millisecond), ignoresTERM, byCancel,
			envelope.ResultCancelled, agent.ExitCancelled, cancelled + killed, true, nil},
		{"descendants that ignore SIGTERM are SIGKILLed after the grace", graceOf(300 * time.Millisecond), leavesTERMIgnorers, byCancel,
			envelope.ResultCancelled, agent.ExitCancelled, cancelled + mainOnly, true, []string{"MAIN"}},
		{"a drain ends a task that ignores SIGTERM", graceOf(300 * time.Millisecond), ignoresTERM, byDrain,
			envelope.ResultCancelled, agent.ExitCancelled, `\nchiffon: cancelled: the agent's drain timeout passed\n` + killed, true, nil},
		{"no grace SIGKILLs at once", graceOf(0), trapsTERM, byCancel, envelope.ResultCancelled, agent.ExitCancelled,
			cancelled + `chiffon: SIGKILL sent to the process group at once \(cancel_grace is 0\)\n$`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pids := map[string]string{}
			for _, name := range taskPids {
				pids[name] = filepath.Join(dir, name)
			}
			t.Cleanup(func() { killPids(pids) })
			h := newHarness(t, func(c *agent.Config) {
				c.WorkTypes = map[string]agent.WorkTypeConfig{"work": {Shell: tc.script, SetEnv: pids, CancelGrace: tc.grace}}
				if tc.by == byDrain {
					c.DrainTimeout = agent.Duration(time.Millisecond)
				}
			})
			h.start(nil)
			var hints *envelope.Hints
			if tc.by == byDeadline {
				hints = &envelope.Hints{MaxDurationSeconds: 3}
			}
			req := h.request("work", nil, hints)
			w := h.send(req)
			w.waitOutput("ready")
			ended := time.Now()
			switch tc.by {
			case byCancel:
				h.control(&envelope.Cancel{TaskID: req.Payload.(*envelope.WorkRequest).TaskID, Reason: "operator"})
			case byDrain:
				h.stop() // returns once the task has ended
			}
			r, _ := w.result()
			took := time.Since(ended)
			if r.Status != tc.status || r.ExitCode != tc.exit {
				t.Fatalf("result %s, exit %d, want %s, %d; output %q", r.Status, r.ExitCode, tc.status, tc.exit, r.Output)
			}
			m := regexp.MustCompile(tc.output).FindStringSubmatch(r.Output)
			if m == nil {
				t.Fatalf("output %q, want it to end as %q", r.Output, tc.output)
			}
			checkStopTimes(t, tc.grace, m, tc.killed, took)
			for _, name := range taskPids {
				// ESRCH: neither running nor a zombie left unreaped.
				if pid := pidIn(t, pids[name]); syscall.Kill(pid, 0) != syscall.ESRCH {
					t.Errorf("%s %d is still there when the task has ended", name, pid)
				}
				_, err := os.Stat(pids[name] + ".cleaned")
				if want := slices.Contains(tc.cleaned, name); (err == nil) != want {
					t.Errorf("%s cleaned up: %v, want %v", name, err == nil, want)
				}
			}
		})
	}
}

// checkStopTimes checks that a task SIGKILLed after the grace had all of it
// (took, since it was told to end, is at least the grace), and that processes
// said to have exited after SIGTERM (m[1]) did so within it.
func checkStopTimes(t *testing.T, grace *agent.Duration, m []string, killed bool, took time.Duration) {
	t.Helper()
	g := agent.DefaultCancelGrace
	if grace != nil {
		g = time.Duration(*grace)
	}
	if killed && took < g {
		t.Errorf("SIGKILLed %v after the task was told to end, within the %v grace", took, g)
	}
	if len(m) < 2 {
		return
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d >= g {
		t.Errorf("exited %q after SIGTERM (%v), want within the %v grace", m[1], err, g)
	}
}

// pidIn reads the pid a script wrote to path.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	pid, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		t.Fatalf("pid in %s: %v %v", path, err, err2)
	}
	return pid
}

// killPids SIGKILLs the processes whose pids are in files, so that none outlives a
// failed test.
func killPids(files map[string]string) {
	for _, path := range files {
		b, err := os.ReadFile(path)
		if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
