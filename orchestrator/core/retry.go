// The retry policy: which failures are retried (errcodes' Retryable: 5001, 5002,
// 5005), how long the orchestrator waits before each retry (RetryConfig.backoff),
// and where the next attempt may go (nextAgent, mayHaveStarted: only the agent that
// may hold the request in its dedupe cache). machine.failAttempt applies it.

package core

import (
	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// nextAgent decides where the retry of r's failed attempt may go. An agent that
// accepted the request, or may have (neverStarted is false), pins the task: only its
// cache knows the outcome, so every later attempt goes to it. Otherwise the retry
// goes where routing sends it, passing over the agent that failed when another one
// can take it.
func (r *run) nextAgent(neverStarted bool) {
	if !neverStarted || r.accepted {
		r.pinned = r.t.AgentID
	}
	if r.pinned != "" {
		r.stick, r.avoid = r.pinned, ""
	} else {
		r.stick, r.avoid = "", r.t.AgentID
	}
}

// mayHaveStarted reports whether t's agent may hold t's request in its dedupe cache:
// an attempt was in flight or acknowledged, or one timed out. Every such attempt went
// to the pinned agent, which t.AgentID then names.
func mayHaveStarted(t *task.Task) bool {
	if t.AgentID == "" {
		return false
	}
	if t.State == task.StateDispatched || t.State == task.StateRunning || len(t.Steps) > 0 {
		return true
	}
	for _, rt := range t.Retries {
		if rt.Code == int(errcodes.Timeout) && rt.AgentID == t.AgentID {
			return true
		}
	}
	return false
}

// backoffFor is the waits between the retries of a task that has had done of them
// already: the protocol's exact doubling from Initial up to Max (1 s, 2 s, 4 s by
// default), at most MaxRetries in all. A task resumed after a restart goes on from
// the wait it had reached.
func backoffFor(c policy.RetryConfig, done int) backoff.BackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     c.Initial,
		RandomizationFactor: 0, // the protocol's waits are exact
		Multiplier:          2,
		MaxInterval:         c.Max,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	for range done {
		b.NextBackOff()
	}
	return backoff.WithMaxRetries(b, uint64(max(c.MaxRetries-done, 0)))
}
