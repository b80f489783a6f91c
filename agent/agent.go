// Package agent is Chiffon's agent runtime: it registers with the orchestrator, takes
// work_requests on its NATS subject, checks them, runs each request at most once (a
// Badger dedupe cache keyed by request_id), streams status, output and one result,
// and answers cancel, ping and drain.
//
// A library user builds an Agent from a Config, adds Handlers with Handle, and calls
// Run until its context ends. Built-in work types (echo, sleep, system_info) and the
// subprocess work types of Config.WorkTypes are always there.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/kvstore"
	"github.com/nats-io/nats.go"
)

// Agent is one agent instance. Create it with New, add handlers, then Run it.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	subjects broker.Subjects
	agType   envelope.AgentType
	handlers map[string]workType
	// gpus are the GPUs found at start; registrations and heartbeats report their
	// memory without running nvidia-smi every interval.
	gpus []gpu

	ready   chan struct{}
	regKick chan struct{}
	stopNow chan struct{}
	stopped sync.Once

	mu       sync.Mutex
	running  map[string]*task // by request_id
	draining bool
	drainAt  *time.Timer

	nc    *nats.Conn
	pub   *publisher
	cache *DedupeCache
	tasks sync.WaitGroup
}

// workType is a handler and its limits.
type workType struct {
	handler Handler
	timeout time.Duration
}

// New builds an agent from cfg: it validates cfg, reads the token files and sets up
// the built-in and subprocess work types. It connects nothing until Run.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cfg = cfg.withDefaults()
	var err error
	if cfg.Token == "" {
		if cfg.Token, err = broker.ReadTokenFile(cfg.TokenFile); err != nil {
			return nil, fmt.Errorf("agent: token_file: %w", err)
		}
	}
	if cfg.OrchestratorToken == "" {
		if cfg.OrchestratorToken, err = broker.ReadTokenFile(cfg.OrchestratorTokenFile); err != nil {
			return nil, fmt.Errorf("agent: orchestrator_token_file: %w", err)
		}
	}
	a := &Agent{
		cfg:      cfg,
		log:      cfg.Logger.With("agent_id", cfg.ID),
		subjects: broker.Subjects{Prefix: cfg.NATS.Prefix},
		agType:   envelope.AgentType(cfg.Type),
		handlers: map[string]workType{},
		ready:    make(chan struct{}),
		regKick:  make(chan struct{}, 1),
		stopNow:  make(chan struct{}),
		running:  map[string]*task{},
		gpus:     gpuMemory(),
	}
	a.addBuiltins()
	for name, wt := range cfg.WorkTypes {
		sp, err := newSubprocess(name, wt)
		if err != nil {
			return nil, fmt.Errorf("agent: work_types.%s: %w", name, err)
		}
		a.handlers[name] = workType{handler: sp.run, timeout: time.Duration(wt.Timeout)}
	}
	return a, nil
}

// Handle adds (or replaces) the handler of a work type. Call it before Run.
func (a *Agent) Handle(workType string, h Handler) {
	a.handlers[workType] = workTypeOf(h)
}

func workTypeOf(h Handler) workType { return workType{handler: h} }

// WorkTypes lists the work types the agent offers, sorted.
func (a *Agent) WorkTypes() []string {
	names := make([]string, 0, len(a.handlers))
	for n := range a.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Ready is closed once Run has subscribed to the agent's subjects.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// StopNow makes a Run that is draining cancel the running tasks at once instead of
// waiting for the drain timeout (a second SIGTERM).
func (a *Agent) StopNow() { a.stopped.Do(func() { close(a.stopNow) }) }

// Run connects to NATS, opens the dedupe cache, registers, and serves until ctx is
// done. It then drains: no new work is taken, running tasks get up to the drain
// timeout to finish and are cancelled after it, everything is flushed and the cache
// is closed. Run returns nil after a clean drain.
func (a *Agent) Run(ctx context.Context) error {
	cache, err := OpenDedupeCache(a.cfg.DataDir, time.Duration(a.cfg.DedupeTTL), a.log)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.cache = cache
	defer func() {
		if err := cache.Close(); err != nil {
			a.log.Error("close dedupe cache", "err", err)
		}
	}()
	nc, err := broker.Connect(broker.ConnConfig{
		URLs: a.cfg.NATS.URLs, Name: "chiffon-agent-" + a.cfg.ID, Logger: a.log,
		OnReconnect: func(*nats.Conn) { a.kickRegister() },
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer nc.Close()
	a.nc = nc
	a.pub = &publisher{nc: nc, auth: broker.AuthHeader(a.cfg.Token, a.cfg.ID), log: a.log}

	subs, err := a.subscribe()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	bgWG.Add(3)
	go func() { defer bgWG.Done(); a.registerLoop(bg) }()
	go func() { defer bgWG.Done(); a.heartbeatLoop(bg) }()
	go func() { defer bgWG.Done(); kvstore.RunGC(cache.db.DB, 10*time.Minute, bg.Done()) }()
	a.kickRegister()
	close(a.ready)
	a.log.Info("agent running", "type", a.cfg.Type, "work_types", a.WorkTypes())

	<-ctx.Done()
	a.log.Info("agent draining", "timeout", time.Duration(a.cfg.DrainTimeout))
	a.drain(time.Duration(a.cfg.DrainTimeout))
	a.waitTasks()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	a.sendHeartbeat()
	stopBG()
	bgWG.Wait()
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		a.log.Warn("flush on shutdown", "err", err)
	}
	a.log.Info("agent stopped")
	return nil
}

func (a *Agent) subscribe() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for subj, h := range map[string]nats.MsgHandler{
		a.subjects.AgentWork(a.cfg.ID):    a.onWork,
		a.subjects.AgentControl(a.cfg.ID): a.onControl,
		a.subjects.Discover():             a.onDiscover,
	} {
		s, err := a.nc.Subscribe(subj, h)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	// The server must know the subscriptions before Ready says so. While the broker
	// is down, nats.go replays them on reconnect.
	if err := a.nc.FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		a.log.Warn("flush subscriptions", "err", err)
	}
	return subs, nil
}

// drain stops new work and, after timeout (or StopNow), cancels running tasks.
func (a *Agent) drain(timeout time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
	if a.drainAt != nil {
		a.drainAt.Stop()
	}
	a.drainAt = time.AfterFunc(timeout, func() { a.cancelAll(errDrainTimeout) })
}

// waitTasks waits until every task has ended, cancelling them on StopNow.
func (a *Agent) waitTasks() {
	done := make(chan struct{})
	go func() { a.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-a.stopNow:
		a.cancelAll(errStopped)
		<-done
	}
	a.mu.Lock()
	a.drainAt.Stop()
	a.mu.Unlock()
}

func (a *Agent) cancelAll(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.running {
		t.cancel(cause)
	}
}

// status is idle, busy or draining, with the active task ids.
func (a *Agent) status() (string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.running))
	for _, t := range a.running {
		ids = append(ids, t.req.TaskID)
	}
	slices.Sort(ids)
	switch {
	case a.draining:
		return envelope.AgentDraining, ids
	case len(ids) > 0:
		return envelope.AgentBusy, ids
	}
	return envelope.AgentIdle, ids
}
