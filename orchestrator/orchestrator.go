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
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/ratelog"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/enroll"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/ha"
	"github.com/chiffon-dev/chiffon/orchestrator/httpapi"
	"github.com/chiffon-dev/chiffon/orchestrator/metrics"
	"github.com/chiffon-dev/chiffon/orchestrator/storeformat"
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

// Orchestrator is a running orchestrator: the task lifecycle (package core,
// one core while it runs alone, one per term while it leads a group), with the
// HTTP API, the batch and schedule runners and the webhook receivers around
// it. Its methods are safe for concurrent use.
type Orchestrator struct {
	cfg Config
	sec secrets
	log *slog.Logger
	// authLog logs refused messages at a bounded rate: a flood of them must not
	// flood the log.
	authLog *ratelog.Logger
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
	req     *broker.Requester
	st      task.Store
	metrics *metrics.Metrics
	// link follows the connection to the broker, for every core.
	link core.Link
	// hooks delivers events to the webhook receivers; nil without any.
	hooks *webhook.Dispatcher
	// api is the HTTP API (package httpapi).
	api *httpapi.API
	// ha is this orchestrator's part in a group of them (ha.enabled), or nil.
	ha *ha.Group
	// running is the core while one runs: from Open alone, from lead to
	// stepDown in a group.
	running atomic.Pointer[core.Core]
	// fleet runs the batches and the schedules while the core runs.
	fleet *fleet.Fleet
	// enroller enrolls, joins and revokes agent hosts (enrollments.go); nil
	// without an enroll section. enrollCA is the site CA's certificate
	// (DER) then, which the API adds to its chain.
	enroller *enroll.Enroller
	enrollCA []byte

	closeOnce sync.Once
	wg        sync.WaitGroup
	done      chan struct{}
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
		authLog: ratelog.New(log.With("orch_id", id), ratelog.Policy{}),
		subj:    broker.Subjects{Prefix: cfg.NATS.Prefix},
		done:    make(chan struct{}),
		metrics: metrics.New(),
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
	if err := o.newEnroller(); err != nil {
		_ = o.st.Close()
		o.closeConns()
		return nil, err
	}
	if err := o.newAPI(opts.Pages); err != nil {
		_ = o.st.Close()
		o.closeConns()
		return nil, err
	}
	if len(receivers) > 0 { // Close stops it
		o.hooks = webhook.New(receivers, webhook.Options{Logger: o.log, Keeper: deliveryKeeper{o.st}})
	}
	o.fleet = o.newFleet()
	start := o.lead
	if cfg.HA.Enabled {
		start = o.startHA
	}
	if err := start(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// lead runs a fresh core, as Open does for a lone orchestrator and as each
// leader term of a group does: it subscribes to the agents, resumes the
// unfinished tasks and starts the batch and schedule runners. First it brings
// the task store to this build's format (package storeformat). Its readers are
// the batch runners and the webhook receivers; the task streams are the
// core's own.
func (o *Orchestrator) lead() error {
	// The store is this leader's alone from here: bring it to this build's format.
	changes, err := storeformat.Upgrade(o.st)
	if err != nil {
		return err
	}
	for _, c := range changes {
		o.log.Info("task store upgraded to this release's format", "change", c)
	}
	params := core.Params{Config: core.Config{ID: o.id, Subjects: o.subj, Policy: o.cfg.lifecycle()},
		Conn: o.nc, Store: o.st, Requester: o.req, Metrics: o.metrics, Link: &o.link, Log: o.log, AuthLog: o.authLog}
	if params.Config.Agents, err = o.coreAgents(); err != nil {
		return err
	}
	if o.ha != nil {
		params.Config.Instance, params.Leading = o.ha.Name(), o.ha.Leading
	}
	c := core.New(params)
	extra := map[string]nats.MsgHandler{}
	if o.ha != nil {
		extra[o.subj.OrchAPI(o.id)] = func(msg *nats.Msg) { o.handleForwarded(c, msg) }
	}
	c.Subscribe(o.fleetReader)
	if o.hooks != nil {
		c.Subscribe(hookReader(o.hooks))
	}
	if err := c.Start(extra); err != nil {
		c.Close()
		return err
	}
	o.running.Store(c)
	o.restoreJoined()
	o.metrics.SetLeader(true)
	return o.startFleet()
}

// stop drops the running core, if any, with the runners.
func (o *Orchestrator) stop() {
	o.fleet.Stop()
	if c := o.running.Swap(nil); c != nil {
		c.Close()
	}
}

// ID returns the orchestrator's orch_id.
func (o *Orchestrator) ID() string { return o.id }

// Handler returns the HTTP API (API routes, health, readiness and metrics).
func (o *Orchestrator) Handler() http.Handler { return o.api.Handler() }

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
	tlsConf = o.withCA(tlsConf)
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
	srv, ln := o.cfg.HTTP.Limits.NewServer(ctx, ln, o.api.Handler(), tlsConf)
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

// Close stops the orchestrator: it drops the core (its subscriptions, timers
// and SSE streams end), closes its own NATS connection and the store.
// Unfinished tasks stay in the store and resume at the next Open.
func (o *Orchestrator) Close() error {
	first := false
	o.closeOnce.Do(func() { first = true })
	if !first {
		return nil
	}
	close(o.done)
	if o.ha != nil {
		o.ha.Close() // it leads no more
	}
	o.stop()
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
