package core

import (
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/ratelimit"
)

// Rate limits (package ratelimit): how often work is sent to an agent.
// Routing (routing.go) passes over an agent its limiters hold back, takes the
// token only from the agent it chooses, and, when a task must wait, arms the
// agent's wake timer to drain the queue when the limiter allows again. The
// loop owns all of it.

// rateLimits are one agent's limiters and its wake timer.
type rateLimits struct {
	ratelimit.Limits
	// wake drains the agent's type's queue at wakeAt, when a task waits for
	// one of its limiters.
	wake   *time.Timer
	wakeAt time.Time
}

// rateHold says a limiter of agent holds a dispatch back (ratelimit.Hold).
type rateHold struct {
	agent *agentEntry
	ratelimit.Hold
}

// newRateLimits are the limiters of agent id, its own set from its config
// at each registration (setRateLimits).
func (o *Core) newRateLimits(id string) rateLimits {
	return rateLimits{Limits: ratelimit.Limits{Agent: id,
		WorkRate: func(workType string) string { return o.cfg.WorkTypes[workType].RateLimit }}}
}

// setRateLimits gives a its own limiter, from its config, once (SetOwn).
func (a *agentEntry) setRateLimits() {
	if a.conf != nil {
		a.rl.SetOwn(a.conf.RateLimit)
	}
}

// ownHold reports whether a's own limiter holds any dispatch to it back at now.
func (a *agentEntry) ownHold(now time.Time) (rateHold, bool) {
	h, held := a.rl.OwnHold(now)
	return rateHold{agent: a, Hold: h}, held
}

// rateHeld reports whether a's limiters hold a dispatch of workType to it back
// at now: until both allow it.
func (o *Core) rateHeld(a *agentEntry, workType string, now time.Time) (rateHold, bool) {
	h, held := a.rl.Held(workType, now)
	return rateHold{agent: a, Hold: h}, held
}

// charge takes the token of a dispatch of workType from a's limiters: routing
// calls it for the agent it chose, right after rateHeld said they allow it.
func (o *Core) charge(a *agentEntry, workType string, now time.Time) { a.rl.Charge(workType, now) }

// wakeSlack is added to a wake timer, so that the limiter allows when it fires
// rather than a rounding error short of it.
const wakeSlack = time.Millisecond

// wakeAt drains a's type's queue at until (unless a's wake timer fires sooner
// already): a task waits there for a's rate limit.
func (o *Core) wakeAt(a *agentEntry, until time.Time) {
	rl := &a.rl
	if rl.wake != nil && !rl.wakeAt.After(until) {
		return
	}
	if rl.wake != nil {
		rl.wake.Stop()
	}
	rl.wakeAt = until
	var tm *time.Timer
	tm = time.AfterFunc(time.Until(until)+wakeSlack, func() {
		o.post(func() {
			if rl.wake != tm { // stopped, or armed again since
				return
			}
			rl.wake = nil
			if !o.closed {
				o.drain(a.typ)
			}
		})
	})
	rl.wake = tm
}

// stopWake stops a's wake timer.
func (a *agentEntry) stopWake() {
	if a.rl.wake != nil {
		a.rl.wake.Stop()
		a.rl.wake = nil
	}
}
