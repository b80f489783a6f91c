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
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/ratelog"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
)

// Agent is one agent instance. Create it with New, add handlers, then Run it.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	subjects broker.Subjects
	agType   envelope.AgentType
	handlers map[string]workType
	// gpu is the machine's GPUs: registrations and heartbeats report them,
	// work requests that need GPU memory are admitted by them.
	gpu *gpuHost

	// instance tells this process from any other with the same agent id; it
	// travels in the Chiffon-Instance header of every message.
	instance string
	ready    chan struct{}
	regKick  chan struct{}
	// accepted is closed at the first register_ack; refused delivers the
	// orchestrator's refusal of this process, which ends Run.
	accepted     chan struct{}
	acceptedOnce sync.Once
	refused      chan error
	stopNow      chan struct{}
	stopped      sync.Once

	mu       sync.Mutex
	running  map[string]*task // by request_id
	draining bool
	drainAt  *time.Timer

	// authLog logs refused messages at a bounded rate; authFailures counts them.
	authLog *ratelog.Logger
	// auth checks every message from the orchestrator against its token for this
	// agent.
	auth         broker.Authenticator
	authFailures atomic.Int64

	metrics *metrics
	// metricsAddr is the address the metrics server listens on, once bound.
	metricsAddr atomic.Pointer[string]

	nc    *nats.Conn
	pub   *publisher
	cache dedupe.Cache
	tasks sync.WaitGroup
}

// workType is a handler, its limits and what the agent says of it.
type workType struct {
	handler Handler
	timeout time.Duration
	// spec goes to the orchestrator in the registration's catalogue.
	spec worktype.Spec
	// schema, compiled from spec.Parameters, checks a request before the
	// handler runs; nil when the spec has none.
	schema *worktype.Schema
	// gpuNeed is the GPU memory every task of the type needs, in MiB; 0 none.
	gpuNeed int64
}

// newWorkType is h with spec, its schema compiled.
func newWorkType(h Handler, spec worktype.Spec) (workType, error) {
	schema, err := spec.Compile()
	return workType{handler: h, spec: spec, schema: schema}, err
}

// New builds an agent from cfg: it validates cfg, reads the token files and sets up
// the built-in and subprocess work types. It connects nothing until Run.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.NATS.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
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
		authLog:  ratelog.New(cfg.Logger.With("agent_id", cfg.ID), ratelog.Policy{}),
		subjects: broker.Subjects{Prefix: cfg.NATS.Prefix},
		agType:   envelope.AgentType(cfg.Type),
		handlers: map[string]workType{},
		instance: envelope.NewID(),
		ready:    make(chan struct{}),
		regKick:  make(chan struct{}, 1),
		accepted: make(chan struct{}),
		refused:  make(chan error, 1),
		stopNow:  make(chan struct{}),
		running:  map[string]*task{},
	}
	a.gpu = newGPUHost(cfg.GPU, a.log)
	a.logGPUs()
	a.metrics = newMetrics(a)
	a.auth = broker.Authenticator{Want: func(string) (string, bool) { return a.cfg.OrchestratorToken, true }}
	a.addBuiltins()
	for name, c := range cfg.WorkTypes {
		sp, err := newSubprocess(name, c)
		if err != nil {
			return nil, fmt.Errorf("agent: work_types.%s: %w", name, err)
		}
		sp.gpu = a.gpu
		wt, err := newWorkType(sp.run, c.spec())
		if err != nil {
			return nil, fmt.Errorf("agent: work_types.%s: %w", name, err)
		}
		wt.timeout, wt.gpuNeed = time.Duration(c.Timeout), c.GPUVRAMMB
		a.handlers[name] = wt
	}
	return a, nil
}

// Handle adds (or replaces) the handler of a work type, which declares no
// description and no parameter schema. Call it before Run.
func (a *Agent) Handle(name string, h Handler) {
	a.handlers[name] = workType{handler: h}
}

// HandleSpec adds (or replaces) the handler of a work type with its spec: the
// agent tells the orchestrator the description, parameter schema and approval
// in its registration, and refuses a request whose parameters fail the schema
// (exit code ExitInvalidParameters) without calling h; h gets the parameters
// with the schema's top-level defaults filled in. Call it before Run; the
// error is a spec that that does not compile (worktype.Spec.Compile).
func (a *Agent) HandleSpec(name string, spec worktype.Spec, h Handler) error {
	wt, err := newWorkType(h, spec)
	if err != nil {
		return fmt.Errorf("agent: work type %s: %w", name, err)
	}
	a.handlers[name] = wt
	return nil
}

// Catalog is what the agent says of each work type it offers, as its
// registration carries it.
func (a *Agent) Catalog() worktype.Catalog {
	c := make(worktype.Catalog, len(a.handlers))
	for name, wt := range a.handlers {
		c[name] = wt.spec
	}
	return c
}

// WorkTypes lists the work types the agent offers, sorted.
func (a *Agent) WorkTypes() []string {
	names := make([]string, 0, len(a.handlers))
	for n := range a.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Ready is closed once the orchestrator has accepted the agent's registration and
// Run has subscribed to its work subject.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// isAccepted reports whether the orchestrator has accepted this process.
func (a *Agent) isAccepted() bool {
	select {
	case <-a.accepted:
		return true
	default:
		return false
	}
}

// AuthFailures is how many messages the agent refused for a missing or wrong
// token.
func (a *Agent) AuthFailures() int64 { return a.authFailures.Load() }

// MetricsAddr is the address on which Run serves GET /metrics, such as
// "127.0.0.1:41234" for a metrics_listen of "127.0.0.1:0"; "" when metrics_listen
// is empty or Run has not bound it yet (it has once Ready is closed).
func (a *Agent) MetricsAddr() string {
	if p := a.metricsAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// StopNow makes a Run that is draining cancel the running tasks at once instead of
// waiting for the drain timeout (a second SIGTERM).
func (a *Agent) StopNow() { a.stopped.Do(func() { close(a.stopNow) }) }

// Run connects to NATS, opens the dedupe cache, registers, and serves until ctx is
// done. It takes work only once the orchestrator has accepted its registration,
// and returns an error when the orchestrator refuses it (another process with
// the same id is live, or the id is bound to another type). On ctx's end it
// drains: no new work is taken, running tasks get up to the drain timeout to
// finish and are cancelled after it, everything is flushed and the cache is
// closed. Run returns nil after a clean drain.
//
// With metrics_listen set, Run first binds that address, returning an error at
// once when it cannot, and serves GET /metrics there until it returns.
func (a *Agent) Run(ctx context.Context) error {
	// A task runs as the agent's user unless its work type says run_as: it must
	// not read the agent's memory or environment through /proc.
	if err := HardenProcess(); err != nil {
		a.log.Warn("could not hide the agent's /proc entries from its tasks", "err", err)
	}
	if a.cfg.MetricsListen != "" {
		ms, err := startMetricsServer(a.cfg.MetricsListen, a.metrics.reg, a.log)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		defer ms.shutdown()
		a.metricsAddr.Store(&ms.addr)
	}
	closeCache, err := a.openCache()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer closeCache()
	nc, err := a.connect()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer nc.Close()

	// The control subject first: the orchestrator pings it to learn whether
	// another process with this id is live before it accepts this one.
	control, err := a.subscribe(a.subjects.AgentControl(a.cfg.ID), a.onControl)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	subs := []*nats.Subscription{control}
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	bgWG.Add(2)
	go func() { defer bgWG.Done(); a.registerLoop(bg) }()
	go func() { defer bgWG.Done(); a.heartbeatLoop(bg) }()
	a.kickRegister()

	subs, runErr := a.serve(ctx, subs)
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
	a.authLog.Flush(context.Background())
	a.log.Info("agent stopped")
	return runErr
}

// openCache sets a.cache: the configured dedupe cache, or one opened in the data
// directory, which the func returned closes (it does nothing for a configured one).
func (a *Agent) openCache() (closeCache func(), err error) {
	a.cache = a.cfg.DedupeCache
	if a.cache != nil {
		return func() {}, nil
	}
	cache, err := OpenDedupeCache(a.cfg.DataDir, time.Duration(a.cfg.DedupeTTL), a.log)
	if err != nil {
		return nil, err
	}
	a.cache = cache
	return func() {
		if err := cache.Close(); err != nil {
			a.log.Error("close dedupe cache", "err", err)
		}
	}, nil
}

// connect connects to NATS as the agent, which registers again on each reconnect,
// and sets up its publisher.
func (a *Agent) connect() (*nats.Conn, error) {
	cc := a.cfg.NATS.ConnConfig("chiffon-agent-" + a.cfg.ID)
	cc.Logger = a.log
	cc.OnReconnect = func(*nats.Conn) {
		a.metrics.reconnects.Inc() // before registering: a registration follows the count
		a.kickRegister()
	}
	cc.InboxPrefix = a.subjects.Inbox(broker.RoleAgent, a.cfg.ID)
	nc, err := broker.Connect(cc)
	if err != nil {
		return nil, err
	}
	a.nc = nc
	a.metrics.conn.Store(nc)
	identified := broker.AuthHeader(a.cfg.Token, a.cfg.ID)
	identified.Set(broker.HeaderInstance, a.instance)
	a.pub = &publisher{nc: nc, auth: broker.AuthHeader(a.cfg.Token, a.cfg.ID), identified: identified, log: a.log}
	return nc, nil
}

// serve takes work once the orchestrator has accepted the registration, until ctx
// is done or the orchestrator refuses the agent (the error returned). It returns
// subs with the work subscription added.
func (a *Agent) serve(ctx context.Context, subs []*nats.Subscription) ([]*nats.Subscription, error) {
	select {
	case <-a.accepted:
		work, err := a.subscribe(a.subjects.AgentWork(a.cfg.ID), a.onWork)
		if err != nil {
			return subs, fmt.Errorf("agent: %w", err)
		}
		subs = append(subs, work)
		a.sendHeartbeat() // the orchestrator routes work here from this heartbeat on
		close(a.ready)
		a.log.Info("agent running", "type", a.cfg.Type, "work_types", a.WorkTypes())
		select {
		case <-ctx.Done():
			return subs, nil
		case err := <-a.refused:
			return subs, err
		}
	case err := <-a.refused:
		return subs, err
	case <-ctx.Done():
		return subs, nil
	}
}

// subscribe subscribes h to subject and makes sure the server knows it before it
// returns. While the broker is down, nats.go replays it on reconnect.
func (a *Agent) subscribe(subject string, h nats.MsgHandler) (*nats.Subscription, error) {
	s, err := a.nc.Subscribe(subject, h)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if err := broker.ConfirmSubscription(a.nc, subject, 5*time.Second); err != nil {
		_ = s.Unsubscribe()
		return nil, err
	}
	return s, nil
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
