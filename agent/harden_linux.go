package agent

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// HardenProcess makes the agent process not dumpable (prctl PR_SET_DUMPABLE 0):
// its children, which run as the same user, can then no longer read its
// environment, memory or open files through /proc/<agent pid>/ (environ, mem,
// fd), where the agent's tokens are. It also turns off core dumps of the agent.
// Call it once at start, before any work type runs. The children themselves are
// unaffected: the kernel makes a process dumpable again at execve.
func HardenProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("agent: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
