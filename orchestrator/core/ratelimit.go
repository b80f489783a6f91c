package core

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"golang.org/x/time/rate"
)

// Rate limits: how often work is sent to an agent. Each agent has a limiter of
// its own (agents[].rate_limit) and one per work type with a rate_limit in
// work_types, counted on that agent alone; a dispatch needs both to allow it.
// Each is a token bucket of one token, so that dispatches are spaced evenly.
// Routing (routing.go) passes over an agent its limiters hold back, takes the
// token only from the agent it chooses, and, when a task must wait, arms the
// agent's wake timer to drain the queue when the limiter allows again. The
// loop owns all of it.

// rateLimits are one agent's limiters.
type rateLimits struct {
	// own is the agent's limiter, nil without a rate_limit; ownSpec is its
	// rate as configured.
	own     *rate.Limiter
	ownSpec string
	// byWork holds the work types' limiters, made on first use (nil for a work
	// type without a rate_limit).
	byWork map[string]*rate.Limiter
	// wake drains the agent's type's queue at wakeAt, when a task waits for
	// one of its limiters.
	wake   *time.Timer
	wakeAt time.Time
}

// rateHold says a limiter of agent holds a dispatch back until until.
type rateHold struct {
	agent *agentEntry
	until time.Time
	// why is "rate limit of agent X (5/s)" or "rate limit of work type W on
	// agent X (5/s)".
	why string
}

// String is why with the time it ends: "rate limit of agent X (5/s) until T".
func (h rateHold) String() string {
	return h.why + " until " + h.until.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// newLimiter is a limiter of spec ("N/s", "N/m", "N/h", checked by Validate),
// or nil for "".
func newLimiter(spec string) *rate.Limiter {
	if spec == "" {
		return nil
	}
	l, err := policy.ParseRate(spec)
	if err != nil {
		return nil // Validate refused it already
	}
	return rate.NewLimiter(l, 1)
}

// setRateLimits gives a its own limiter, from its config, once: a limiter lives
// as long as the agent's entry, so that registering again does not refill it.
func (a *agentEntry) setRateLimits(ac *policy.AgentConfig) {
	if ac == nil || a.rl.own != nil || ac.RateLimit == "" {
		return
	}
	a.rl.own, a.rl.ownSpec = newLimiter(ac.RateLimit), ac.RateLimit
}

// workLimiter is a's limiter for workType, or nil when work_types sets it no
// rate_limit.
func (o *Core) workLimiter(a *agentEntry, workType string) *rate.Limiter {
	if l, ok := a.rl.byWork[workType]; ok {
		return l
	}
	l := newLimiter(o.cfg.WorkTypes[workType].RateLimit)
	if a.rl.byWork == nil {
		a.rl.byWork = map[string]*rate.Limiter{}
	}
	a.rl.byWork[workType] = l
	return l
}

// heldBy reports whether lim holds a dispatch back at now, and until when.
func heldBy(lim *rate.Limiter, now time.Time) (time.Time, bool) {
	if lim == nil {
		return time.Time{}, false
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return time.Time{}, false
	}
	wait := time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
	return now.Add(wait), true
}

// ownHold reports whether a's own limiter holds any dispatch to it back at now.
func (a *agentEntry) ownHold(now time.Time) (rateHold, bool) {
	until, held := heldBy(a.rl.own, now)
	if !held {
		return rateHold{}, false
	}
	return rateHold{agent: a, until: until, why: fmt.Sprintf("rate limit of agent %s (%s)", a.id, a.rl.ownSpec)}, true
}

// rateHeld reports whether a's limiters hold a dispatch of workType to it back
// at now: until both allow it.
func (o *Core) rateHeld(a *agentEntry, workType string, now time.Time) (rateHold, bool) {
	h, held := a.ownHold(now)
	if until, ok := heldBy(o.workLimiter(a, workType), now); ok && until.After(h.until) {
		h = rateHold{agent: a, until: until, why: fmt.Sprintf("rate limit of work type %s on agent %s (%s)",
			workType, a.id, o.cfg.WorkTypes[workType].RateLimit)}
		held = true
	}
	return h, held
}

// charge takes the token of a dispatch of workType from a's limiters: routing
// calls it for the agent it chose, right after rateHeld said they allow it.
func (o *Core) charge(a *agentEntry, workType string, now time.Time) {
	if a.rl.own != nil {
		a.rl.own.AllowN(now, 1)
	}
	if l := o.workLimiter(a, workType); l != nil {
		l.AllowN(now, 1)
	}
}

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
