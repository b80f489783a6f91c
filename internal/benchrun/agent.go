package benchrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// Work types the bench agent offers.
const (
	workNoop   = "bench_noop"
	workChunks = "bench_chunks"
)

// benchLine is one line of the chunks phase's output: a log line with quotes, which
// JSON escapes, as real output has.
const benchLine = "2026-01-19T04:21:04Z kuma[1]: monitor \"uptime\" ok <200> took 12ms\n"

// startStack starts an orchestrator and one infra agent with the bench's work types on
// url, under a subject prefix of run's own, with the agent's real Badger cache in dir
// and the orchestrator's tasks in the store cfg.Store names (Badger in dir, or
// JetStream on url under a stream of their own with cfg.Replicas). The agent runs
// cfg.InFlight tasks at once (at least 4). Logs are formatted at info level as the
// daemons do, then discarded, so that their cost is in the figures.
func startStack(ctx context.Context, url, dir, run string, cfg Config) (*stack.Stack, error) {
	nats := broker.NATSConfig{URLs: []string{url}, Prefix: "chiffonbench" + run}
	return stack.Start(ctx, stack.Config{
		NATSURL:      url,
		DataDir:      dir,
		Orchestrator: orchestrator.Config{NATS: nats, Store: cfg.storeConfig(run)},
		Agents: []stack.Agent{{
			Config: agent.Config{ID: "bench-agent", Type: "infra", NATS: nats, MaxConcurrency: max(cfg.InFlight, 4)},
			Handlers: map[string]agent.Handler{
				workNoop: func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
					return agent.Result{}, nil
				},
				workChunks: emitOutput(make(map[int64][]byte)),
			},
		}},
		Log: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
}

// emitOutput returns the handler that writes the number of bytes given in
// parameters.bytes in one write: the agent sends it as chunked work_status messages.
// The text is built once per size, so the figure is Chiffon's, not the handler's.
func emitOutput(texts map[int64][]byte) agent.Handler {
	var mu sync.Mutex
	return func(_ context.Context, req *agent.Request, p agent.Progress) (agent.Result, error) {
		n, err := paramInt(req.Parameters["bytes"])
		if err != nil {
			return agent.Result{}, err
		}
		mu.Lock()
		out, ok := texts[n]
		if !ok {
			out = []byte(strings.Repeat(benchLine, int(n)/len(benchLine)+1)[:n])
			texts[n] = out
		}
		mu.Unlock()
		_, err = p.Write(out)
		return agent.Result{}, err
	}
}

func paramInt(v any) (int64, error) {
	switch n := v.(type) {
	case interface{ Int64() (int64, error) }:
		return n.Int64()
	case float64:
		return int64(n), nil
	case int:
		return int64(n), nil
	}
	return 0, fmt.Errorf("parameter bytes: not a number: %v", v)
}
