package main

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// exitError carries a process exit code out of a command's RunE.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode wraps err so that main exits with code; a nil err exits silently.
func exitCode(code int, err error) error { return &exitError{code: code, err: err} }

// Exit codes of `chiffon submit --wait` and `chiffon watch`, documented in
// docs/operations.md. A failed task exits with its own exit code (1 when that is out of
// 1..255); these name the other ends.
const (
	exitTaskError     = 69  // the task ended in error: timeout, no agent, invalid, refused
	exitTaskCancelled = 130 // the task was cancelled
	exitTaskRejected  = 77  // the task was rejected: nobody approved it
	exitNotFinished   = 75  // the watch stopped before the task finished (Ctrl-C, or no orchestrator answered)
)

// exitParamError is the exit code of a task the work type's catalogue refuses:
// a parameter its schema refuses, found by the CLI (a --param k=v that is not
// of its type) or by the orchestrator (422 invalid_parameter), or a work type
// no agent of the type offers (422 unknown_work_type). Nothing was submitted.
// It is sysexits' EX_DATAERR; any command that submits (submit, submit --all,
// schedule add) exits with it, documented in docs/operations.md.
const exitParamError = 65

// followExitCodes is the help text of the exit codes of following a task.
const followExitCodes = `Exit codes: 0 the task succeeded; 1..255 it failed with this exit code (1 also when
the CLI itself failed); 2 a usage error; 65 a parameter the work type's schema
refuses, or a work type no agent of the type offers: nothing was submitted; 69 the
task ended in error (timeout, no agent, refused); 75 the wait stopped before the task
finished (Ctrl-C, or no orchestrator of --server answered for 2 minutes: the client
lost track), and the task goes on; 130 the task was cancelled.`

// taskExitCode maps a finished task to the process exit code.
func taskExitCode(t *task.Task) int {
	switch t.State {
	case task.StateSucceeded:
		return 0
	case task.StateFailed:
		if t.Result != nil && t.Result.ExitCode > 0 && t.Result.ExitCode < 256 {
			return int(t.Result.ExitCode)
		}
		return 1
	case task.StateCancelled:
		return exitTaskCancelled
	case task.StateError:
		return exitTaskError
	case task.StateRejected:
		return exitTaskRejected
	}
	return exitNotFinished
}
