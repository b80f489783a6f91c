//go:build !linux

package agent

import (
	"context"
	"os/exec"
	"syscall"
)

// processTree is the processes of one task: here, its main process's process
// group. A descendant that leaves the group (setsid) is not found on this system.
type processTree struct{ main int }

// startProcessTree starts cmd, req's main process, as one the agent ends with its
// process group.
func startProcessTree(cmd *exec.Cmd, req *Request) (*processTree, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &processTree{main: cmd.Process.Pid}, nil
}

// watch kills the group when ctx ends before the main process has exited.
func (t *processTree) watch(ctx context.Context, exited <-chan struct{}) {
	select {
	case <-ctx.Done():
		t.kill()
	case <-exited:
	}
}

// end kills what is left of the group once the main process has been waited for.
func (t *processTree) end() { t.kill() }

func (t *processTree) kill() {
	// Negative pid: the whole process group, grandchildren included.
	_ = syscall.Kill(-t.main, syscall.SIGKILL)
}
