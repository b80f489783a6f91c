package benchrun

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/agent/memcache"
	"github.com/chiffon-dev/chiffon/broker"
)

// lightAgents are the agents of `chiffon bench --agents`, run in this process:
// each with a NATS connection of its own, as a real agent has, and an in-memory
// dedupe cache instead of Badger, offering the no-op work type only, whose
// handler counts the tasks each agent runs. Each finds nvidia-smi as an agent
// does, on PATH: where there is one, each runs it at every heartbeat. Each has
// a data dir of its own, as a real agent has, for its health file: one file
// rewritten by thousands of agents at each heartbeat made them wait on its
// lock, with a thread each.
type lightAgents struct {
	ids    []string
	runs   []atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error // the first agent to stop on its own
}

// lightAgentID is the id of light agent i.
func lightAgentID(i int) string { return fmt.Sprintf("light-%05d", i) }

// startLightAgents starts n light agents on url under prefix, with files' tokens,
// heartbeating every hb, each with its data dir in dir. It returns once they run,
// before they have registered.
func startLightAgents(n int, url, prefix, dir string, files siteFiles, hb time.Duration) (*lightAgents, error) {
	token, err := broker.ReadTokenFile(files.agent)
	if err != nil {
		return nil, err
	}
	orchToken, err := broker.ReadTokenFile(files.orch)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &lightAgents{runs: make([]atomic.Int64, n), cancel: cancel, errs: make(chan error, 1)}
	for i := range n {
		id := lightAgentID(i)
		data := filepath.Join(dir, id)
		if err := os.Mkdir(data, 0o700); err != nil {
			l.stop()
			return nil, err
		}
		a, err := agent.New(agent.Config{ID: id, Type: "infra", DataDir: data,
			NATS:  broker.NATSConfig{URLs: []string{url}, Prefix: prefix},
			Token: token, OrchestratorToken: orchToken, HeartbeatInterval: agent.Duration(hb),
			DedupeCache: memcache.New(agent.DefaultDedupeTTL), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			l.stop()
			return nil, err
		}
		runs := &l.runs[i]
		a.Handle(workNoop, func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			runs.Add(1)
			return agent.Result{}, nil
		})
		l.ids = append(l.ids, id)
		l.wg.Go(func() {
			if err := a.Run(ctx); err != nil {
				select {
				case l.errs <- fmt.Errorf("agent %s: %w", id, err):
				default:
				}
			}
		})
	}
	return l, nil
}

// counts are the tasks each agent has run, in the order of ids.
func (l *lightAgents) counts() []int64 {
	out := make([]int64, len(l.runs))
	for i := range l.runs {
		out[i] = l.runs[i].Load()
	}
	return out
}

// stop stops every agent and waits for them.
func (l *lightAgents) stop() {
	l.cancel()
	l.wg.Wait()
}
