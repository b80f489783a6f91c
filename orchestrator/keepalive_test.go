package orchestrator_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestSilentHandlerPastTheInactivityTimeoutSucceedsWithoutRetry: a handler that
// writes nothing for three inactivity timeouts is kept alive by the agent's keepalive
// statuses, so its task succeeds on the first attempt, with no 5001 and no retry.
func TestSilentHandlerPastTheInactivityTimeoutSucceedsWithoutRetry(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack = 400 * time.Millisecond
	e.cfg.Timeouts.Inactivity = 400 * time.Millisecond
	silence := 3 * e.cfg.Timeouts.Inactivity
	o := e.open()
	var runs atomic.Int32
	a, err := agent.New(agent.Config{ID: "code-1", Type: "code", NATS: broker.NATSConfig{URLs: []string{e.srv.ClientURL()}},
		DataDir: t.TempDir(), Token: e.tokens["code-1"], OrchestratorToken: e.orchTokens["code-1"],
		HeartbeatInterval: agent.Duration(time.Second), DrainTimeout: agent.Duration(time.Second),
		// Well inside the inactivity timeout, so that a late keepalive is still in time.
		KeepaliveInterval: agent.Duration(e.cfg.Timeouts.Inactivity / 8),
		Logger:            slog.New(slog.NewTextHandler(e.logs, nil)).With("side", "agent")})
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	a.Handle("echo", func(ctx context.Context, _ *agent.Request, _ agent.Progress) (agent.Result, error) {
		runs.Add(1)
		// Silent work that takes its time: the span is what this test is about.
		select {
		case <-time.After(silence):
			return agent.Result{Output: "done"}, nil
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent.Run: %v", err)
	case <-time.After(wait):
		t.Fatal("agent not ready")
	}
	waitFor(t, "agent online", func() bool { return o.Agents()[0].State == "online" })

	tsk := submit(t, o, nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.Attempts != 1 || len(final.Retries) != 0 || final.Error != nil {
		t.Fatalf("got %s after %d attempts, retries %+v, error %+v; want succeeded at once",
			final.State, final.Attempts, final.Retries, final.Error)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	if took := final.FinishedAt.Sub(tsk.CreatedAt); took < silence {
		t.Fatalf("task took %s, less than the handler's %s of silence", took, silence)
	}
}
