package broker

import (
	"testing"
	"time"
)

// TestReconnectDelayDoublesWithJitterWithinBounds: each delay is within ±20% of its
// doubling step and within min and max, and the delays of one step differ, so that
// clients cut off together do not reconnect in step.
func TestReconnectDelayDoublesWithJitterWithinBounds(t *testing.T) {
	const minWait, maxWait = 100 * time.Millisecond, 5 * time.Second
	for _, tc := range []struct {
		attempts int
		step     time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{6, 3200 * time.Millisecond},
		{7, 5 * time.Second},
		{50, 5 * time.Second},
	} {
		lo := max(time.Duration(float64(tc.step)*0.8), minWait)
		hi := min(time.Duration(float64(tc.step)*1.2), maxWait)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := reconnectDelay(tc.attempts, minWait, maxWait)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", tc.attempts, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("attempt %d: only %d different delays in 200: no jitter", tc.attempts, len(seen))
		}
	}
}
