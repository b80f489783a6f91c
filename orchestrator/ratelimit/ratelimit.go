// Package ratelimit is how often work may be sent to one agent: its own limit
// (agents[].rate_limit) and one per work type with a rate_limit in
// work_types, counted on that agent alone; a dispatch needs both to allow it.
// Each is a token bucket of one token, so that dispatches are spaced evenly.
//
// It is pure arithmetic on the times it is given: routing asks Held of each
// candidate, charges the one it chooses (Charge), and, when a task must wait,
// arms a timer for the Hold's end itself.
package ratelimit

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"golang.org/x/time/rate"
)

// Limits are one agent's limiters. Set Agent and WorkRate, then SetOwn; the
// zero value limits nothing. Not safe for concurrent use: one owner (the
// core's loop) calls it.
type Limits struct {
	// Agent is the agent's id, as the holds name it.
	Agent string
	// WorkRate is the rate_limit work_types sets a work type ("N/s", "N/m" or
	// "N/h", as policy.ParseRate reads it), "" for none; nil means none for
	// every work type.
	WorkRate func(workType string) string

	// own is the agent's limiter, nil without a rate_limit; ownSpec is its
	// rate as configured.
	own     *rate.Limiter
	ownSpec string
	// byWork holds the work types' limiters, made on first use (nil for a work
	// type without a rate_limit).
	byWork map[string]*rate.Limiter
}

// Hold says a limiter holds a dispatch back until Until.
type Hold struct {
	Until time.Time
	// Why is "rate limit of agent X (5/s)" or "rate limit of work type W on
	// agent X (5/s)".
	Why string
}

// String is Why with the time it ends: "rate limit of agent X (5/s) until T".
func (h Hold) String() string {
	return h.Why + " until " + h.Until.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// newLimiter is a limiter of spec ("N/s", "N/m", "N/h", checked by the
// config's Validate), or nil for "" or a spec that does not parse.
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

// SetOwn gives the agent its own limiter of spec, once: a limiter lives as
// long as its Limits, so that an agent registering again does not refill it.
// "" sets none.
func (l *Limits) SetOwn(spec string) {
	if l.own != nil || spec == "" {
		return
	}
	l.own, l.ownSpec = newLimiter(spec), spec
}

// workLimiter is the limiter of workType, or nil when WorkRate sets it no
// rate_limit.
func (l *Limits) workLimiter(workType string) *rate.Limiter {
	if lim, ok := l.byWork[workType]; ok {
		return lim
	}
	var lim *rate.Limiter
	if l.WorkRate != nil {
		lim = newLimiter(l.WorkRate(workType))
	}
	if l.byWork == nil {
		l.byWork = map[string]*rate.Limiter{}
	}
	l.byWork[workType] = lim
	return lim
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

// OwnHold reports whether the agent's own limiter holds any dispatch to it
// back at now.
func (l *Limits) OwnHold(now time.Time) (Hold, bool) {
	until, held := heldBy(l.own, now)
	if !held {
		return Hold{}, false
	}
	return Hold{Until: until, Why: fmt.Sprintf("rate limit of agent %s (%s)", l.Agent, l.ownSpec)}, true
}

// Held reports whether the limiters hold a dispatch of workType back at now:
// until both allow it, so the Hold is the one that ends last.
func (l *Limits) Held(workType string, now time.Time) (Hold, bool) {
	h, held := l.OwnHold(now)
	if until, ok := heldBy(l.workLimiter(workType), now); ok && until.After(h.Until) {
		h = Hold{Until: until, Why: fmt.Sprintf("rate limit of work type %s on agent %s (%s)",
			workType, l.Agent, l.WorkRate(workType))}
		held = true
	}
	return h, held
}

// Charge takes the token of a dispatch of workType at now from the limiters:
// routing calls it for the agent it chose, right after Held said they allow
// it.
func (l *Limits) Charge(workType string, now time.Time) {
	if l.own != nil {
		l.own.AllowN(now, 1)
	}
	if lim := l.workLimiter(workType); lim != nil {
		lim.AllowN(now, 1)
	}
}
