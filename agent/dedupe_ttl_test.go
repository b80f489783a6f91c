package agent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestDuplicateAfterTheDedupeTTLRunsAgain: a duplicate within dedupe_ttl of the
// result is replayed from the cache; once the entry has expired, the same request
// is new to the agent and runs again.
func TestDuplicateAfterTheDedupeTTLRunsAgain(t *testing.T) {
	// Badger expires entries on whole seconds: a TTL of 2s keeps an entry at least
	// 1s, time enough for the duplicate that must be replayed.
	const ttl = 2 * time.Second
	h := newHarness(t, func(c *agent.Config) { c.DedupeTTL = agent.Duration(ttl) })
	var runs atomic.Int64
	h.start(func(a *agent.Agent) {
		a.Handle("echo", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			return agent.Result{Output: fmt.Sprintf("run %d", runs.Add(1))}, nil
		})
	})
	req := h.request("echo", nil, nil)
	if r, _ := h.send(req).result(); r.Status != envelope.ResultSuccess || r.Output != "run 1" {
		t.Fatalf("first run: %+v", r)
	}
	if r, _ := h.send(req).result(); r.Output != "run 1" || runs.Load() != 1 {
		t.Fatalf("duplicate within the TTL: got %q after %d runs, want the replay of run 1", r.Output, runs.Load())
	}
	deadline := time.Now().Add(3 * ttl)
	for {
		r, _ := h.send(req).result()
		if r.Output != "run 1" {
			if r.Status != envelope.ResultSuccess || r.Output != "run 2" || runs.Load() != 2 {
				t.Fatalf("after the TTL: got %s %q after %d runs, want run 2", r.Status, r.Output, runs.Load())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still replayed %s after the result, with dedupe_ttl %s", 3*ttl, ttl)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, within the deadline
	}
}
