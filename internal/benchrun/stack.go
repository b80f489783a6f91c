package benchrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
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

// stack is an orchestrator and one agent in this process, with real Badger stores
// in a temporary directory, and the orchestrator's HTTP API on 127.0.0.1.
type stack struct {
	orch     *orchestrator.Orchestrator
	apiURL   string
	apiToken string

	cancel context.CancelFunc
	done   []chan error
}

// startStack opens an orchestrator and an agent of type infra on url, under a subject
// prefix of their own, and waits until the agent is registered. Logs are formatted
// at info level as the daemons do, then discarded.
func startStack(ctx context.Context, url, dir string, capacity int) (*stack, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	prefix := "chiffonbench" + randHex(4)
	nats := broker.NATSConfig{URLs: []string{url}, Prefix: prefix}
	orchToken, agentToken, apiToken := broker.NewToken(), broker.NewToken(), broker.NewToken()
	o, err := orchestrator.Open(orchestrator.Config{
		NATS: nats, DataDir: filepath.Join(dir, "orchestrator"),
		Agents: []orchestrator.AgentConfig{{ID: "bench-agent", Type: envelope.Infra,
			Token: agentToken, OrchestratorToken: orchToken}},
		APIToken: apiToken,
	}, orchestrator.Options{Logger: log.With("daemon", "orchestrator")})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stack{orch: o, apiToken: apiToken, cancel: cancel}
	a, err := agent.New(agent.Config{
		ID: "bench-agent", Type: "infra", NATS: nats, DataDir: filepath.Join(dir, "agent"),
		MaxConcurrency: max(capacity, 4), Token: agentToken, OrchestratorToken: orchToken,
		Logger: log.With("daemon", "agent"),
	})
	if err != nil {
		s.close()
		return nil, err
	}
	a.Handle(workNoop, func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		return agent.Result{}, nil
	})
	a.Handle(workChunks, emitOutput(make(map[int64][]byte)))
	s.goRun(func() error { return a.Run(ctx) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.close()
		return nil, err
	}
	s.apiURL = "http://" + ln.Addr().String()
	s.goRun(func() error { return o.Serve(ctx, ln) })
	if err := s.waitOnline(ctx, "bench-agent"); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
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

func (s *stack) goRun(fn func() error) {
	done := make(chan error, 1)
	s.done = append(s.done, done)
	go func() { done <- fn() }()
}

// waitOnline waits until the orchestrator lists agent id as online.
func (s *stack) waitOnline(ctx context.Context, id string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, a := range s.orch.Agents() {
			if a.ID == id && a.State == "online" {
				return nil
			}
		}
		for _, d := range s.done {
			select {
			case err := <-d:
				return fmt.Errorf("daemon stopped: %v", err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return errors.New("agent not online after 20s")
}

// close stops the agent and the API, then closes the orchestrator.
func (s *stack) close() {
	s.cancel()
	for _, d := range s.done {
		<-d
	}
	_ = s.orch.Close()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
