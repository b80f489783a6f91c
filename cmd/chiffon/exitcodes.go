package main

import "github.com/chiffon-dev/chiffon/orchestrator"

// Exit codes of `chiffon submit --wait` and `chiffon watch`, documented in
// docs/operations.md. A failed task exits with its own exit code (1 when that is out of
// 1..255); these name the other ends.
const (
	exitTaskError     = 69  // the task ended in error: timeout, no agent, invalid, refused
	exitTaskCancelled = 130 // the task was cancelled
	exitNotFinished   = 75  // the watch stopped before the task finished
)

// taskExitCode maps a finished task to the process exit code.
func taskExitCode(t *orchestrator.Task) int {
	switch t.State {
	case orchestrator.StateSucceeded:
		return 0
	case orchestrator.StateFailed:
		if t.Result != nil && t.Result.ExitCode > 0 && t.Result.ExitCode < 256 {
			return int(t.Result.ExitCode)
		}
		return 1
	case orchestrator.StateCancelled:
		return exitTaskCancelled
	case orchestrator.StateError:
		return exitTaskError
	}
	return exitNotFinished
}
