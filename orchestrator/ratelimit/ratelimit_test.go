package ratelimit

import (
	"testing"
	"time"
)

// step is one call at t0+at: a charge, or a question (Held of work, or
// OwnHold when own is set) with its answer: held until t0+until, for why.
type step struct {
	at     time.Duration
	charge bool
	own    bool
	work   string
	held   bool
	until  time.Duration
	why    string
}

// TestLimitsHoldAndCharge: what the limiters answer after the dispatches
// charged to them: each a bucket of one token, the later of the agent's and
// the work type's holds winning, the agent's limiter kept when it is set
// again.
func TestLimitsHoldAndCharge(t *testing.T) {
	rates := map[string]string{"build": "1/s", "slow": "1/m", "bad": "x/s"}
	const ownWhy, buildWhy = "rate limit of agent a1 (2/s)", "rate limit of work type build on agent a1 (1/s)"
	ms := time.Millisecond
	cases := []struct {
		name string
		own  []string // SetOwn, in turn
		// rates are WorkRate's; nil WorkRate when noRates.
		noRates bool
		steps   []step
	}{
		{name: "no limit holds nothing", noRates: true, steps: []step{
			{charge: true, work: "build"}, {work: "build"}, {own: true}}},
		{name: "the agent's own limit", own: []string{"2/s"}, steps: []step{
			{work: "echo"}, {charge: true, work: "echo"},
			{at: 100 * ms, work: "echo", held: true, until: 500 * ms, why: ownWhy},
			{at: 100 * ms, own: true, held: true, until: 500 * ms, why: ownWhy},
			{at: 500 * ms, work: "echo"}}},
		{name: "a work type's limit, on that work type only", steps: []step{
			{charge: true, work: "build"},
			{at: 200 * ms, work: "build", held: true, until: time.Second, why: buildWhy},
			{at: 200 * ms, work: "echo"}, {at: 200 * ms, own: true},
			{at: time.Second, work: "build"}}},
		{name: "the later hold wins", own: []string{"2/s"}, steps: []step{
			{charge: true, work: "build"},
			{at: 100 * ms, work: "build", held: true, until: time.Second, why: buildWhy},
			{at: 600 * ms, work: "build", held: true, until: time.Second, why: buildWhy},
			{at: 600 * ms, work: "echo"}}},
		{name: "the agent's hold when it ends later", own: []string{"2/s"}, steps: []step{
			{charge: true, work: "build"}, {at: 900 * ms, charge: true, work: "echo"},
			{at: 950 * ms, work: "build", held: true, until: 1400 * ms, why: ownWhy}}},
		{name: "set again, the agent's limiter is not refilled", own: []string{"2/s", "100/s"}, steps: []step{
			{charge: true, work: "echo"},
			{at: 10 * ms, work: "echo", held: true, until: 500 * ms, why: ownWhy}}},
		{name: "a charge takes a token from both", own: []string{"2/s"}, steps: []step{
			{charge: true, work: "slow"},
			{at: 500 * ms, own: true},
			{at: 500 * ms, work: "slow", held: true, until: time.Minute, why: "rate limit of work type slow on agent a1 (1/m)"}}},
		{name: "a rate that does not parse limits nothing", own: []string{"fast"}, steps: []step{
			{charge: true, work: "bad"}, {work: "bad"}, {own: true}}},
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := Limits{Agent: "a1", WorkRate: func(w string) string { return rates[w] }}
			if tc.noRates {
				l.WorkRate = nil
			}
			for _, spec := range tc.own {
				l.SetOwn(spec)
			}
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.charge {
					l.Charge(s.work, now)
					continue
				}
				var h Hold
				var held bool
				if s.own {
					h, held = l.OwnHold(now)
				} else {
					h, held = l.Held(s.work, now)
				}
				if held != s.held || held && (!h.Until.Equal(t0.Add(s.until)) || h.Why != s.why) {
					t.Errorf("step %d (%+v): held %v until +%s (%q); want %v until +%s (%q)",
						i, s, held, h.Until.Sub(t0), h.Why, s.held, s.until, s.why)
				}
			}
		})
	}
}

// TestHoldSaysWhenItEnds: a hold's text is its why and its end, in UTC to the
// millisecond.
func TestHoldSaysWhenItEnds(t *testing.T) {
	h := Hold{Until: time.Date(2026, 1, 2, 4, 4, 5, 250e6, time.FixedZone("x", 3600)), Why: "rate limit of agent a1 (2/s)"}
	if got, want := h.String(), "rate limit of agent a1 (2/s) until 2026-01-02T03:04:05.250Z"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
