// Package orchestrator is Chiffon's control point: it learns agents from their
// registrations and heartbeats, routes each task to the least-loaded healthy agent of
// its type, retries and times out dispatches, guards every agent with a circuit
// breaker, keeps every task, status and output in a task.Store (Badger's by default,
// package badgerstore) so that nothing is lost across restarts, and serves an HTTP
// API with Server-Sent Events and metrics.
//
// Open starts an orchestrator, Run serves its HTTP API until the context ends, and
// Close stops it. The task records are package task's, the API's requests and
// answers package api's; package client talks to the API.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/internal/lazylog"
	"github.com/chiffon-dev/chiffon/internal/ratelog"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"github.com/nats-io/nats.go"
)

// Options carries what an orchestrator is given rather than configured with.
type Options struct {
	// Logger receives the orchestrator's logs; nil means slog.Default().
	Logger *slog.Logger
	// Conn is an open NATS connection to use instead of dialing Config.NATS.URLs.
	// The orchestrator does not close it.
	Conn *nats.Conn
	// StoreConn is an open NATS connection for the JetStream task store
	// (store.kind jetstream) to use instead of dialing one as
	// store.jetstream.nats; nil with Conn set means Conn. The orchestrator does
	// not close it.
	StoreConn *nats.Conn
	// Store keeps the tasks instead of a Badger store in Config.DataDir/tasks.
	// The orchestrator closes it.
	Store task.Store
	// Pages, when set, makes the web pages served at Config.UI.Path (the
	// dashboard, package ui): it gets the API (Handler), the check of an API
	// token (Authenticate) and the path, and needs nothing else of the
	// orchestrator.
	Pages func(api http.Handler, authenticate func(token string) (role string, ok bool), path string) (http.Handler, error)
}

// Orchestrator is a running orchestrator. Its methods are safe for concurrent use.
type Orchestrator struct {
	cfg Config
	sec secrets
	log *slog.Logger
	// authLog logs refused messages at a bounded rate: a flood of them must not
	// flood the log.
	authLog *ratelog.Logger
	// auth checks every message from an agent against that agent's token.
	auth    broker.Authenticator
	id      string
	subj    broker.Subjects
	nc      *nats.Conn
	ownConn bool
	// storeNC holds the JetStream task store (conns.go); nil with Badger's.
	storeNC      *nats.Conn
	ownStoreConn bool
	// req sends the requests whose answers the orchestrator waits for (control
	// requests to agents, forwarded API calls) on reply subjects only the
	// intended peer may publish on (broker.Requester).
	req *broker.Requester
	// fwd signs and checks the answers to forwarded API requests (fwdsign.go).
	fwd     fwdSigner
	st      task.Store
	metrics *metrics
	// hooks delivers events to the webhook receivers; nil without any.
	hooks   *webhook.Dispatcher
	handler http.Handler
	mux     *http.ServeMux
	// streams caps the API's event streams (package httplimit).
	streams *httplimit.StreamLimiter

	// The core's subscriptions (see subscribe); after Close, subsClosed.
	subsMu     sync.Mutex
	subs       []*nats.Subscription
	subsClosed bool
	// ha is this orchestrator's part in a group of them (ha.enabled), or nil.
	ha *haState
	// link follows the connection to the broker (link.go).
	link link
	// fleet runs the batches and the schedules while the core runs.
	fleet *fleet.Fleet

	// The loop (loop.go) owns the rest: only its jobs touch them.
	mail     *mailbox
	loopDone chan struct{}
	m        machine
	closed   bool
	agents   map[string]*agentEntry
	runs     map[string]*run
	queues   map[envelope.AgentType][]string
	watchers map[string]map[*watcher]struct{}
	// moreComing is set while the job running has more behind it in its batch: the
	// store may hold the writes it makes for a later one's commit (see
	// task.Write.MoreComing); held counts them, and the loop flushes them when the
	// batch ends.
	moreComing bool
	held       int

	wg   sync.WaitGroup
	done chan struct{}
}

// Open starts an orchestrator: it reads the tokens, connects to NATS, opens the task
// store, subscribes to the registry and its task inboxes, asks every agent to register,
// and resumes every unfinished task. With ha.enabled it joins its group's election
// instead, and does all but the first three only while it leads (ha.go).
func Open(cfg Config, opts Options) (*Orchestrator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	sec, err := cfg.readSecrets()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	id, err := loadOrchID(cfg.DataDir, cfg.ID)
	if err != nil {
		return nil, err
	}
	receivers, err := cfg.readWebhooks()
	if err != nil {
		return nil, err
	}
	o := &Orchestrator{
		cfg: cfg, sec: sec, log: log.With("orch_id", id), id: id,
		authLog:  ratelog.New(log.With("orch_id", id), ratelog.Policy{}),
		auth:     broker.Authenticator{Want: sec.agentToken},
		fwd:      newFwdSigner(sec.apiTokens[0].token),
		subj:     broker.Subjects{Prefix: cfg.NATS.Prefix},
		agents:   map[string]*agentEntry{},
		runs:     map[string]*run{},
		queues:   map[envelope.AgentType][]string{},
		watchers: map[string]map[*watcher]struct{}{},
		done:     make(chan struct{}),
		metrics:  newMetrics(),
		mail:     newMailbox(),
		loopDone: make(chan struct{}),
		m: machine{timeouts: cfg.Timeouts, now: func() time.Time { return time.Now().UTC() },
			nonce: broker.NewNonce},
	}
	if err := o.connect(opts); err != nil {
		o.closeConns()
		return nil, err
	}
	o.st = opts.Store
	if o.st == nil {
		if o.st, err = openStore(cfg, o.storeNC, o.log); err != nil {
			o.closeConns()
			return nil, err
		}
	}
	o.handler = o.newAPI()
	if opts.Pages != nil {
		if err := o.mountPages(opts.Pages); err != nil {
			_ = o.st.Close()
			o.closeConns()
			return nil, err
		}
	}
	if len(receivers) > 0 { // Close stops it
		o.hooks = webhook.New(receivers, webhook.Options{Logger: o.log, Keeper: deliveryKeeper{o.st}})
	}
	o.fleet = o.newFleet()
	go o.loop()
	start := o.start
	if cfg.HA.Enabled {
		start = o.startHA
	}
	if err := start(); err != nil {
		o.Close()
		return nil, err
	}
	if !cfg.HA.Enabled {
		if err := o.startFleet(); err != nil {
			o.Close()
			return nil, err
		}
	}
	return o, nil
}

// start starts the core: it subscribes to the registry and the task inboxes (and,
// in a group, to the requests the standbys forward), counts the stored tasks,
// resumes the unfinished ones and asks every agent to register.
func (o *Orchestrator) start() error {
	subs := []struct {
		subject string
		fn      nats.MsgHandler
	}{
		{o.subj.Registers(), o.handleRegister},
		{o.subj.Heartbeats(), o.handleHeartbeat},
		{o.subj.OrchTasks(o.id), o.handleTaskMsg},
	}
	if o.ha != nil {
		subs = append(subs, struct {
			subject string
			fn      nats.MsgHandler
		}{o.subj.OrchAPI(o.id), o.handleForwarded})
	}
	for _, s := range subs {
		if err := o.subscribe(s.subject, s.fn); err != nil {
			return err
		}
	}
	for _, s := range subs {
		if err := broker.ConfirmSubscription(o.nc, s.subject, 5*time.Second); err != nil {
			return err
		}
	}
	if err := o.initMetrics(); err != nil {
		return err
	}
	if err := o.recover(); err != nil {
		return err
	}
	o.discover()
	return nil
}

// mountPages serves pages at Config.UI.Path, beside the API.
func (o *Orchestrator) mountPages(pages func(http.Handler, func(string) (string, bool), string) (http.Handler, error)) error {
	path := o.cfg.UI.path()
	h, err := pages(o.handler, o.Authenticate, path)
	if err != nil {
		return err
	}
	if path != "/" {
		h = http.StripPrefix(strings.TrimSuffix(path, "/"), h)
	}
	o.mux.Handle(path, h)
	return nil
}

// ID returns the orchestrator's orch_id.
func (o *Orchestrator) ID() string { return o.id }

// Handler returns the HTTP API (API routes, health, readiness and metrics).
func (o *Orchestrator) Handler() http.Handler { return o.handler }

// Run serves the HTTP API on Config.HTTP.Listen until ctx ends, then shuts the server
// down; over HTTPS when Config.HTTP.TLS names a certificate. With no listen address
// it only waits for ctx. It does not Close o.
func (o *Orchestrator) Run(ctx context.Context) error {
	if o.cfg.HTTP.Listen == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", o.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	return o.Serve(ctx, ln)
}

// Serve serves the HTTP API on ln until ctx ends, and closes ln. When Config.HTTP.TLS
// names a certificate it serves HTTPS (TLS 1.2 or later), and reads the certificate
// first: a bad file fails here, naming its config key. Plain HTTP on a listener
// beyond loopback is refused unless Config.HTTP.Insecure allows it.
// Config.HTTP.Limits bound its connections and how long each request may take.
func (o *Orchestrator) Serve(ctx context.Context, ln net.Listener) error {
	tlsConf, err := o.cfg.HTTP.serverTLS()
	if err == nil {
		err = o.cfg.HTTP.checkPlainBeyondLoopback(ln.Addr().String())
	}
	if err != nil {
		_ = ln.Close()
		return err
	}
	if tlsConf == nil && !isLoopbackAddr(ln.Addr().String()) {
		o.log.Warn("http api serves plain HTTP beyond loopback (http.insecure): tokens and session cookies cross the network in the clear unless a proxy ends TLS",
			"addr", ln.Addr().String())
	}
	srv, ln := o.cfg.HTTP.Limits.NewServer(ctx, ln, o.handler, tlsConf)
	serve := srv.Serve
	if tlsConf != nil {
		serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
	}
	o.log.Info("http api listening", "addr", ln.Addr().String(), "tls", tlsConf != nil)
	errc := make(chan error, 1)
	go func() { errc <- serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-errc
	return nil
}

// Close stops the orchestrator: it unsubscribes, stops every timer, ends SSE streams,
// closes its own NATS connection and the store. Unfinished tasks stay in the store and
// resume at the next Open.
func (o *Orchestrator) Close() error {
	o.fleet.Stop()
	first := false
	_ = o.call(func() {
		if o.closed {
			return
		}
		first, o.closed = true, true
		close(o.done)
		o.unsubscribe()
		o.subsMu.Lock()
		o.subsClosed = true
		o.subsMu.Unlock()
		for _, r := range o.runs {
			r.stopTimers()
		}
		for _, a := range o.agents {
			a.stopTimers()
		}
		for id, ws := range o.watchers {
			for w := range ws {
				w.close()
			}
			delete(o.watchers, id)
		}
	})
	if !first {
		return nil
	}
	// The jobs posted before this run, and see the orchestrator closed.
	o.mail.close()
	<-o.loopDone
	// The writes held for jobs that never came go now.
	o.st.Flush()
	o.wg.Wait()
	o.fleet.Stop() // what a new term started while Close began (ha.go's roles)
	o.authLog.Flush(context.Background())
	if o.hooks != nil {
		o.hooks.Close()
	}
	// The store first: JetStream's commits what is queued over the connection.
	err := o.st.Close()
	o.closeConns()
	return err
}

// Ready reports whether the orchestrator is open and connected to NATS.
func (o *Orchestrator) Ready() bool {
	select {
	case <-o.done:
		return false
	default:
		return o.nc.IsConnected()
	}
}

// loadOrchID returns the orch_id kept in dir, writing want (or a new id) there first
// when it is missing or differs from a configured want.
func loadOrchID(dir, want string) (string, error) {
	path := filepath.Join(dir, "orch_id")
	b, err := os.ReadFile(path)
	if err == nil {
		if have := strings.TrimSpace(string(b)); have != "" && (want == "" || want == have) {
			return have, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read orch_id: %w", err)
	}
	id := want
	if id == "" {
		id = envelope.NewID()
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write orch_id: %w", err)
	}
	return id, nil
}

// discover asks every configured agent to register again, on its control
// subject: the orchestrator's token differs from one agent to the next, so there
// is no message for all of them.
func (o *Orchestrator) discover() {
	for id, a := range o.sec.agents {
		env := envelope.New(envelope.Orchestrator, a.typ, "", "", &envelope.Discover{OrchestratorID: o.id})
		if err := o.publish(o.subj.AgentControl(id), "", id, env); err != nil {
			o.log.Warn("send discover", "agent_id", id, "err", err)
		}
	}
}

// errUnknownAgent is publish's refusal to send to an agent not in the config.
var errUnknownAgent = errors.New("agent not in the orchestrator's config")

// publish sends env on subject with the orchestrator's token for agentID, an
// agent of the config; in a group, only while this orchestrator leads.
func (o *Orchestrator) publish(subject, reply, agentID string, env *envelope.Envelope) error {
	if !o.leading() {
		return errNotLeading
	}
	hdr, ok := o.sec.authHeader(agentID)
	if !ok {
		return errUnknownAgent
	}
	data, err := envelope.Encode(env)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Reply: reply, Data: data, Header: hdr}
	o.metrics.messages.WithLabelValues("out", string(env.Type)).Inc()
	if faultDuplicateOutgoing(env.Type) {
		_ = o.nc.PublishMsg(msg) // test builds only: a duplicated message
	}
	return o.nc.PublishMsg(msg)
}

// request sends env on an agent's control subject and decodes the answer, checking
// that the agent answered with its own token.
func (o *Orchestrator) request(ctx context.Context, agentID string, env *envelope.Envelope) (*envelope.Envelope, error) {
	if !o.leading() {
		return nil, errNotLeading
	}
	hdr, ok := o.sec.authHeader(agentID)
	if !ok {
		return nil, errUnknownAgent
	}
	data, err := envelope.Encode(env)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: o.subj.AgentControl(agentID), Data: data, Header: hdr}
	o.metrics.messages.WithLabelValues("out", string(env.Type)).Inc()
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
		o.metrics.authFailures.Inc()
		return nil, aerr
	}
	rep, err := envelope.Decode(resp.Data)
	if err != nil {
		return nil, err
	}
	o.metrics.messages.WithLabelValues("in", string(rep.Type)).Inc()
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
func (o *Orchestrator) receive(msg *nats.Msg, sender string) (agentID string, env *envelope.Envelope, ok bool, err error) {
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
	o.metrics.messages.WithLabelValues("in", string(env.Type)).Inc()
	return agentID, env, true, nil
}

// authenticate checks msg's bearer token against the token of the agent it names.
// It returns that agent id, or a 5004 that never holds the token.
func (o *Orchestrator) authenticate(msg *nats.Msg) (string, *errcodes.Error) {
	return o.auth.Check(msg)
}

// rejectAuth counts and logs a refused message (never its token, and at a bounded
// rate), and answers 5004 when msg's reply subject is the inbox of sender, the
// agent its subject names. The answer goes to a sender nobody vouched for, so it
// carries no credential of any kind: no token header, and only what the sender
// itself claimed.
func (o *Orchestrator) rejectAuth(msg *nats.Msg, sender string, e *errcodes.Error) {
	o.metrics.authFailures.Inc()
	o.authLog.Warn("refused:"+fmt.Sprint(e.Context[errcodes.KeyTokenStatus]), "message refused: authentication failed", "subject", msg.Subject,
		"agent_id", e.Context[errcodes.KeyAgentID], "token_status", e.Context[errcodes.KeyTokenStatus])
	if err := broker.Refuse(o.nc, o.answerable(msg, sender), e, envelope.Orchestrator, envelope.Infra); err != nil {
		o.log.Warn("answer 5004", "err", err)
	}
}

// taskLog returns a logger carrying a task's ids; a live task's run keeps one (see
// newRun). The ids are formatted only into the lines written (see lazylog).
func (o *Orchestrator) taskLog(t *task.Task) *slog.Logger {
	return lazylog.With(o.log, slog.String("task_id", t.ID), slog.String("request_id", t.RequestID),
		slog.String("trace_id", t.TraceID))
}
