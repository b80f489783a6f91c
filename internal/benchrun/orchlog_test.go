package benchrun

import (
	"context"
	"strings"
	"testing"
	"time"
)

func logLine(at time.Time, msg, agentID string) string {
	return `{"time":"` + at.Format(time.RFC3339Nano) + `","level":"INFO","msg":"` + msg + `","agent_id":"` + agentID + `"}`
}

func TestOrchLogCountsRegistrationsSinceTheMark(t *testing.T) {
	l := newOrchLog()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.line(logLine(t0, msgRegistered, "a"))
	l.mark(t0.Add(time.Second))
	for _, s := range []string{
		logLine(t0.Add(500*time.Millisecond), msgRegistered, "b"), // logged before the mark, read after
		logLine(t0.Add(2*time.Second), msgRegistered, "a"),
		logLine(t0.Add(3*time.Second), msgRegistered, "c"),
		logLine(t0.Add(2500*time.Millisecond), msgRegistered, "a"),
		logLine(t0.Add(4*time.Second), "agent heartbeat", "b"),
		logLine(t0, msgBreakerOpen, "a"),
		logLine(t0, "circuit breaker half-open", "a"),
		logLine(t0, "agent offline: missed heartbeats", "c"),
		"not JSON at all",
	} {
		l.line(s)
	}
	ctx := context.Background()
	last, err := l.waitRegistered(ctx, 2, time.Second, nil)
	if err != nil || !last.Equal(t0.Add(3*time.Second)) {
		t.Errorf("two registered since the mark: last %v, %v; want %v", last, err, t0.Add(3*time.Second))
	}
	if _, err := l.waitRegistered(ctx, 3, 20*time.Millisecond, nil); err == nil || !strings.Contains(err.Error(), "2 of 3") {
		t.Errorf("a third that never registers: %v", err)
	}
	if b, o := l.counts(); b != 1 || o != 1 {
		t.Errorf("breakers opened %d, agents offline %d; want 1 and 1", b, o)
	}
}

func TestOrchLogWaitEndsOnTheRegistrationItWaitsFor(t *testing.T) {
	l := newOrchLog()
	at := time.Now()
	done := make(chan error)
	go func() {
		_, err := l.waitRegistered(context.Background(), 1, time.Minute, nil)
		done <- err
	}()
	l.line(logLine(at, msgRegistered, "a"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
