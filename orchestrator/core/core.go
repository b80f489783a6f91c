// Package core is the orchestrator's task lifecycle: it learns agents from
// their registrations and heartbeats, routes each task to the least-loaded
// healthy agent of its type, dispatches, retries and times out, guards every
// agent with a circuit breaker, holds tasks for approval and keeps every
// change in a task.Store. One loop owns its state (loop.go); the task state
// machine decides (machine.go) and the loop carries out its effects
// (effects.go). What follows the tasks from outside reads one ordered stream
// of events (Subscribe).
//
// New makes a core, Start subscribes it to the agents and resumes the stored
// tasks, Close drops it whole: in a group of orchestrators each leader term
// runs a core of its own.
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/internal/lazylog"
	"github.com/chiffon-dev/chiffon/internal/ratelog"
	"github.com/chiffon-dev/chiffon/orchestrator/catalog"
	"github.com/chiffon-dev/chiffon/orchestrator/metrics"
	"github.com/chiffon-dev/chiffon/orchestrator/roster"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/watch"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
)

// Params are what a core is given: its config and the parts it shares with
// the orchestrator around it.
type Params struct {
	Config Config
	// Conn is the orchestrator's NATS connection; the core does not close it.
	Conn *nats.Conn
	// Store keeps the tasks; the core does not close it.
	Store task.Store
	// Requester sends the control requests to agents (broker.Requester).
	Requester *broker.Requester
	// Metrics are the orchestrator's, shared by every core it runs.
	Metrics *metrics.Metrics
	// Link follows Conn (Link); nil means a link never seen down.
	Link *Link
	// Leading, when set, reports whether the core may still send to agents
	// (in a group: whether the store's lease holds); nil means always.
	Leading func() bool
	Log     *slog.Logger
	// AuthLog logs refused messages at a bounded rate.
	AuthLog *ratelog.Logger
}

// Core is one run of the task lifecycle. Its methods are safe for concurrent
// use.
type Core struct {
	cfg Config
	// roster holds the agents known and their tokens (admit.go).
	roster  *roster.Roster
	log     *slog.Logger
	authLog *ratelog.Logger
	// auth checks every message from an agent against that agent's token.
	auth    broker.Authenticator
	id      string
	subj    broker.Subjects
	nc      *nats.Conn
	req     *broker.Requester
	st      task.Store
	metrics *metrics.Metrics
	link    *Link
	leading func() bool
	// catalog is the latest snapshot of the agents' catalogue (catalog.go).
	catalog atomic.Pointer[catalog.Snapshot]
	// catalogues reads the registrations' catalogues, each distinct one once.
	catalogues worktype.Catalogues
	// registerBy ends the wait for the configured agents to register
	// (registration.go); registered routes the queued tasks again then.
	registerBy time.Time
	registered *time.Timer

	// The core's subscriptions (see subscribe); after Close, subsClosed.
	subsMu     sync.Mutex
	subs       []*nats.Subscription
	subsClosed bool

	// The loop (loop.go) owns the rest: only its jobs touch them.
	mail     *mailbox
	loopDone chan struct{}
	m        machine
	closed   bool
	agents   map[string]*agentEntry
	runs     map[string]*run
	queues   map[envelope.AgentType][]string
	// byType are the agents by type, in the order they first registered:
	// routing scans those of a task's type only (registry.go keeps it).
	byType map[envelope.AgentType][]*agentEntry
	// readers take the core's events (events.go); watchers, the live streams
	// of single tasks, is the first.
	readers  []*reader
	watchers watch.Hub
	// moreComing is set while the job running has more behind it in its batch: the
	// store may hold the writes it makes for a later one's commit (see
	// task.Write.MoreComing); held counts them, and the loop flushes them when the
	// batch ends.
	moreComing bool
	held       int
	// next is the work the effects of the event being applied ask for, which
	// deliver does after them; busy says deliver is at work (loop.go).
	next []followUp
	busy bool

	wg   sync.WaitGroup
	done chan struct{}
}

// New makes a core and starts its loop; it sends and subscribes to nothing
// until Start. p.Config must have its defaults (Config.WithDefaults).
func New(p Params) *Core {
	if p.Link == nil {
		p.Link = &Link{}
	}
	if p.Leading == nil {
		p.Leading = func() bool { return true }
	}
	o := &Core{
		cfg: p.Config, log: p.Log, authLog: p.AuthLog,
		id: p.Config.ID, subj: p.Config.Subjects, nc: p.Conn, req: p.Requester, st: p.Store,
		metrics: p.Metrics, link: p.Link, leading: p.Leading,
		agents: map[string]*agentEntry{}, runs: map[string]*run{}, queues: map[envelope.AgentType][]string{},
		byType: map[envelope.AgentType][]*agentEntry{}, done: make(chan struct{}), mail: newMailbox(),
		loopDone: make(chan struct{}),
		m: machine{timeouts: p.Config.Timeouts, now: func() time.Time { return time.Now().UTC() },
			nonce: broker.NewNonce},
	}
	o.roster = roster.New(p.Config.Agents, p.Config.Instance)
	o.auth = broker.Authenticator{Want: func(id string) (string, bool) { return o.known().Token(id) }}
	o.readers = []*reader{{fn: o.feedWatchers}}
	o.catalog.Store(o.newCatalog()) // nobody registered yet
	go o.loop()
	return o
}

// Start starts the core: it subscribes to the registry and the task inboxes,
// counts the stored tasks, resumes the unfinished ones and asks every agent
// to register. extra are more subscriptions that live and die with the core
// (a leader's forwarded API requests).
func (o *Core) Start(extra map[string]nats.MsgHandler) error {
	subs := map[string]nats.MsgHandler{
		o.subj.Registers():     o.handleRegister,
		o.subj.Heartbeats():    o.handleHeartbeat,
		o.subj.OrchTasks(o.id): o.handleTaskMsg,
	}
	for s, fn := range extra {
		subs[s] = fn
	}
	for s, fn := range subs {
		if err := o.subscribe(s, fn); err != nil {
			return err
		}
	}
	for s := range subs {
		if err := broker.ConfirmSubscription(o.nc, s, 5*time.Second); err != nil {
			return err
		}
	}
	if err := o.initMetrics(); err != nil {
		return err
	}
	o.awaitRegistrations()
	if err := o.recover(); err != nil {
		return err
	}
	o.Discover()
	return nil
}

// Close drops the core: its subscriptions end, every timer stops and its
// readers get Stopped; the live tasks stay in the store for the next core.
// It waits for the loop and the core's goroutines, and closes nothing it was
// given.
func (o *Core) Close() {
	first := false
	o.unsubscribe()
	_ = o.call(func() {
		if o.closed {
			return
		}
		first, o.closed = true, true
		close(o.done)
		o.subsMu.Lock()
		o.subsClosed = true
		o.subsMu.Unlock()
		for _, r := range o.runs {
			r.stopTimers()
		}
		for _, a := range o.agents {
			a.stopTimers()
		}
		if o.registered != nil {
			o.registered.Stop()
		}
		o.emit(Event{Kind: Stopped})
	})
	if !first {
		return
	}
	// The jobs posted before this run, and see the core closed.
	o.mail.close()
	<-o.loopDone
	// The writes held for jobs that never came go now.
	o.st.Flush()
	o.wg.Wait()
}

// Go runs fn on a goroutine Close waits for, and reports false (running
// nothing) once the core is closing.
func (o *Core) Go(fn func()) bool {
	o.subsMu.Lock() // Close waits for o.wg once subsClosed is set
	defer o.subsMu.Unlock()
	if o.subsClosed {
		return false
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		fn()
	}()
	return true
}

// subscribe subscribes fn to subject for the core; unsubscribe ends every such
// subscription. After Close, subscribe refuses.
func (o *Core) subscribe(subject string, fn nats.MsgHandler) error {
	o.subsMu.Lock()
	defer o.subsMu.Unlock()
	if o.subsClosed {
		return ErrClosed
	}
	sub, err := o.nc.Subscribe(subject, fn)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	sub.SetPendingLimits(-1, 256<<20)
	o.subs = append(o.subs, sub)
	return nil
}

// Unsubscribe ends the core's subscriptions, as a core cut off from the
// agents would be; it goes on otherwise.
func (o *Core) Unsubscribe() { o.unsubscribe() }

func (o *Core) unsubscribe() {
	o.subsMu.Lock()
	defer o.subsMu.Unlock()
	for _, s := range o.subs {
		_ = s.Unsubscribe()
	}
	o.subs = nil
}

// errNotLeading is publish's refusal to send while this orchestrator's lease
// is not held.
var errNotLeading = errors.New("this orchestrator does not lead")

// Discover asks every configured agent to register again, on its control
// subject: the orchestrator's token differs from one agent to the next, so there
// is no message for all of them.
func (o *Core) Discover() {
	for id, a := range o.known() {
		env := envelope.New(envelope.Orchestrator, a.Type, "", "", &envelope.Discover{OrchestratorID: o.id})
		if err := o.publish(o.subj.AgentControl(id), "", id, env); err != nil {
			o.log.Warn("send discover", "agent_id", id, "err", err)
		}
	}
}

// errUnknownAgent is publish's refusal to send to an agent not in the config.
var errUnknownAgent = errors.New("agent not in the orchestrator's config")

// publish sends env on subject with the orchestrator's token for agentID, an
// agent of the config; in a group, only while this orchestrator leads.
func (o *Core) publish(subject, reply, agentID string, env *envelope.Envelope) error {
	if !o.leading() {
		return errNotLeading
	}
	hdr, ok := o.known().Header(agentID)
	if !ok {
		return errUnknownAgent
	}
	data, err := envelope.Encode(env)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Reply: reply, Data: data, Header: hdr}
	o.metrics.Messages.WithLabelValues("out", string(env.Type)).Inc()
	if faultDuplicateOutgoing(env.Type) {
		_ = o.nc.PublishMsg(msg) // test builds only: a duplicated message
	}
	return o.nc.PublishMsg(msg)
}

// request sends env on an agent's control subject and decodes the answer, checking
// that the agent answered with its own token.
func (o *Core) request(ctx context.Context, agentID string, env *envelope.Envelope) (*envelope.Envelope, error) {
	if !o.leading() {
		return nil, errNotLeading
	}
	hdr, ok := o.known().Header(agentID)
	if !ok {
		return nil, errUnknownAgent
	}
	data, err := envelope.Encode(env)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: o.subj.AgentControl(agentID), Data: data, Header: hdr}
	o.metrics.Messages.WithLabelValues("out", string(env.Type)).Inc()
	ctx, cancel := context.WithTimeout(ctx, o.cfg.Timeouts.Control)
	defer cancel()
	resp, err := o.req.Request(ctx, msg, o.subj.ControlReplies(agentID))
	if err != nil {
		return nil, err
	}
	id, aerr := o.authenticate(resp)
	if aerr == nil && id != agentID {
		aerr = errcodes.NewAuthenticationFailed(id, errcodes.TokenInvalid)
	}
	if aerr != nil {
		o.metrics.AuthFailures.Inc()
		return nil, aerr
	}
	rep, err := envelope.Decode(resp.Data)
	if err != nil {
		return nil, err
	}
	o.metrics.Messages.WithLabelValues("in", string(rep.Type)).Inc()
	if p, ok := rep.Payload.(*envelope.ErrorPayload); ok {
		return nil, p.Err()
	}
	return rep, nil
}

// receive is how every message from an agent comes in. sender is the agent the
// subject names, which the broker vouches for: the message must name the same
// agent and carry its token (a mismatch is answered with 5004, in sender's inbox
// only, and dropped: ok is false). It is then decoded and counted by type. A
// decode error is returned for the caller to answer in the way its subject allows.
func (o *Core) receive(msg *nats.Msg, sender string) (agentID string, env *envelope.Envelope, ok bool, err error) {
	agentID, aerr := o.authenticate(msg)
	if aerr == nil && agentID != sender {
		aerr = errcodes.NewAuthenticationFailed(agentID, errcodes.TokenInvalid)
	}
	if aerr != nil {
		o.rejectAuth(msg, sender, aerr)
		return agentID, nil, false, nil
	}
	if env, err = envelope.Decode(msg.Data); err != nil {
		return agentID, nil, true, err
	}
	o.metrics.Messages.WithLabelValues("in", string(env.Type)).Inc()
	return agentID, env, true, nil
}

// authenticate checks msg's bearer token against the token of the agent it names.
// It returns that agent id, or a 5004 that never holds the token.
func (o *Core) authenticate(msg *nats.Msg) (string, *errcodes.Error) {
	return o.auth.Check(msg)
}

// rejectAuth counts and logs a refused message (never its token, and at a bounded
// rate), and answers 5004 when msg's reply subject is the inbox of sender, the
// agent its subject names. The answer goes to a sender nobody vouched for, so it
// carries no credential of any kind: no token header, and only what the sender
// itself claimed.
func (o *Core) rejectAuth(msg *nats.Msg, sender string, e *errcodes.Error) {
	o.metrics.AuthFailures.Inc()
	o.authLog.Warn("refused:"+fmt.Sprint(e.Context[errcodes.KeyTokenStatus]), "message refused: authentication failed", "subject", msg.Subject,
		"agent_id", e.Context[errcodes.KeyAgentID], "token_status", e.Context[errcodes.KeyTokenStatus])
	if err := broker.Refuse(o.nc, o.answerable(msg, sender), e, envelope.Orchestrator, envelope.Infra); err != nil {
		o.log.Warn("answer 5004", "err", err)
	}
}

// taskLog returns a logger carrying a task's ids; a live task's run keeps one (see
// newRun). The ids are formatted only into the lines written (see lazylog).
func (o *Core) taskLog(t *task.Task) *slog.Logger {
	return lazylog.With(o.log, slog.String("task_id", t.ID), slog.String("request_id", t.RequestID),
		slog.String("trace_id", t.TraceID))
}
