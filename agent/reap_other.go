//go:build !linux

package agent

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// processTree is the processes of one task: here, its main process's process
// group. A descendant that leaves the group (setsid) is not found on this system.
type processTree struct {
	main int
	stop treeStop // set by watch when ctx ends first, and by end
}

// startProcessTree starts cmd, req's main process, as one the agent ends with its
// process group; grace is the work type's cancel_grace.
func startProcessTree(cmd *exec.Cmd, req *Request, grace time.Duration) (*processTree, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &processTree{main: cmd.Process.Pid, stop: treeStop{grace: grace}}, nil
}

// watch stops the group when ctx ends before the main process has exited:
// SIGTERM, then SIGKILL when the main process still runs after the grace; SIGKILL
// at once when the grace is 0.
func (t *processTree) watch(ctx context.Context, exited <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-exited:
		return
	}
	if t.stop.grace <= 0 {
		t.stop.killAt = time.Now()
		t.signal(syscall.SIGKILL)
		return
	}
	t.stop.termAt = time.Now()
	t.signal(syscall.SIGTERM)
	graceEnd := time.NewTimer(t.stop.grace)
	defer graceEnd.Stop()
	select {
	case <-exited:
		t.stop.mainAt = time.Now()
	case <-graceEnd.C:
		t.stop.killAt = time.Now()
		t.signal(syscall.SIGKILL)
	}
}

// end kills what is left of the group once the main process has been waited for.
// When the main process exited within the grace after SIGTERM, the rest of the
// group has the rest of it first.
func (t *processTree) end() {
	if t.stop.waiting() {
		deadline := t.stop.termAt.Add(t.stop.grace)
		pause := time.Millisecond
		for t.signal(0) && time.Now().Before(deadline) {
			time.Sleep(min(pause, time.Until(deadline))) // not the agent's to wait for
			pause = min(2*pause, 100*time.Millisecond)
		}
		t.stop.ended(t.signal(0))
	}
	t.signal(syscall.SIGKILL)
}

// signal sends sig to the whole process group, grandchildren included, and
// reports whether it has a member.
func (t *processTree) signal(sig syscall.Signal) bool {
	return syscall.Kill(-t.main, sig) == nil
}
