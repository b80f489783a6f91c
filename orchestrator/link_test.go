package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// TestBrokerBlipDoesNotOpenTheBreaker: tasks sent to an agent just before the
// broker restarts time out (their acknowledgements never came), but the
// orchestrator's own connection dropped meanwhile: that says nothing of the
// agent, and its breaker (two failures open it) stays closed. The same timeouts
// without a blip open it.
func TestBrokerBlipDoesNotOpenTheBreaker(t *testing.T) {
	for _, blip := range []bool{true, false} {
		name := "no blip"
		if blip {
			name = "blip"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "code-1")
			e.cfg.Breaker = policy.BreakerConfig{Failures: 2, OpenFor: time.Minute}
			e.cfg.Timeouts.Ack = time.Second
			o, a := e.openWithAgent("code-1", 4)
			var ids []string
			for range 3 {
				ids = append(ids, submit(t, o, nil).ID)
			}
			for range ids {
				a.next() // sent, never acknowledged
			}
			if blip {
				e.srv = testnats.Restart(t, e.srv, broker.ServerConfig{})
			}
			waitFor(t, "every first attempt to time out", func() bool {
				for _, id := range ids {
					tk, err := o.Task(id)
					if err != nil || len(tk.Retries) == 0 {
						return false
					}
				}
				return true
			})
			breaker := ""
			for _, ai := range o.Agents() {
				breaker = ai.Breaker
			}
			if want := map[bool]string{true: "closed", false: "open"}[blip]; breaker != want {
				t.Fatalf("breaker %s, want %s", breaker, want)
			}
			for _, id := range ids {
				_, _ = o.Cancel(context.Background(), id, "")
			}
		})
	}
}
