// The timeout rules (settings in TimeoutConfig): a dispatch must be acknowledged
// within Ack and then send a message at least every Inactivity, or the attempt fails
// with 5001 and is retried on the same agent; a task with hints.max_duration_seconds
// ends in error once that and DeadlineGrace have passed since its first dispatch,
// and its agent is told to stop it. The ack and inactivity timers run under a
// deadline too. An agent that misses its heartbeats fails its attempts the same way
// (registry.go). machine.go arms and applies the timers.

package core

import (
	"time"

	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// maxDuration is t's hints.max_duration_seconds, or 0.
func maxDuration(t *task.Task) time.Duration {
	if t.Hints == nil {
		return 0
	}
	return time.Duration(t.Hints.MaxDurationSeconds) * time.Second
}

// timeoutError is the 5001 that fails r's attempt, or ends r, for why.
func timeoutError(r *run, why string) *errcodes.Error {
	last := r.sentAt
	if r.t.LastAttemptAt != nil {
		last = *r.t.LastAttemptAt
	}
	return errcodes.NewTimeout(why, len(r.t.Retries), last)
}
