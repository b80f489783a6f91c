// Package stack runs a whole Chiffon in one process: a NATS broker (embedded, or one
// given by URL), an orchestrator serving its HTTP API, and one or more agents, started
// together and stopped together. `chiffon up`, `chiffon demo` and `chiffon bench` each
// run one; what differs between them (ports, secrets, handlers, capacity) is Config.
package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/ui"
)

// Config says what a stack runs. Zero values mean the defaults.
type Config struct {
	// NATSURL is the broker to connect to; "" starts an embedded one, set up by Broker.
	NATSURL string
	// Broker sets up the embedded broker when NATSURL is "". Its zero value is a server
	// without authentication on a free port of 127.0.0.1.
	Broker broker.ServerConfig
	// DataDir holds the orchestrator's store (<DataDir>/orchestrator) and each agent's
	// cache (<DataDir>/agents/<id>), unless their configs name data dirs of their own.
	// "" means a new temporary directory, removed by Stop.
	DataDir string
	// Orchestrator is the orchestrator's config. Empty NATS URLs mean the stack's
	// broker; no Agents means the stack's agents, with their tokens; no API token or
	// token file means a fresh token. The API is always served: on HTTP.Listen, or on
	// a free port of 127.0.0.1 when that is "".
	Orchestrator orchestrator.Config
	// Agents are the agents to run; at least one.
	Agents []Agent
	// JoinHost is the host other machines reach the embedded broker at. When
	// the orchestrator enrolls hosts (Orchestrator.Enroll) and names no URL
	// for them, those that join are given the broker's URL with this host and
	// the port it listens on; "" gives them the broker's URL as it is.
	JoinHost string
	// Log receives every daemon's logs, the orchestrator's with daemon=orchestrator and
	// each agent's with agent=<id>; nil discards them.
	Log *slog.Logger
	// OnlineTimeout bounds how long Start waits for every agent to be online; 0 means
	// 20 s.
	OnlineTimeout time.Duration
}

// Agent is one agent of a stack.
type Agent struct {
	// Config is the agent's config. Empty NATS URLs mean the stack's broker; no token
	// (nor token file) means a fresh one, for each token of the pair; a nil Logger
	// means Config.Log's.
	Config agent.Config
	// Handlers are work types run in this process, by name, besides the subprocess
	// work types of Config.
	Handlers map[string]agent.Handler
}

// defaultOnlineTimeout is Config.OnlineTimeout's default.
const defaultOnlineTimeout = 20 * time.Second

// onlinePoll is how often Start asks the orchestrator whether a ready agent is online.
const onlinePoll = 5 * time.Millisecond

// Stack is a running stack. Its methods are safe for concurrent use.
type Stack struct {
	natsURL, apiURL, apiToken string
	ids                       []string

	srv     *broker.Server // nil when Config.NATSURL named the broker
	orch    *orchestrator.Orchestrator
	agents  []*agent.Agent
	tempDir string // removed by Stop; "" when Config.DataDir was given

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errs     chan error
	stopOnce sync.Once
	stopErr  error
}

// Start starts the broker (unless Config.NATSURL names one), the orchestrator with its
// HTTP API and the agents, and returns once every agent is online: registered, and
// listed online by the orchestrator, so that work submitted at once is routed. ctx
// bounds the start only: the stack runs until Stop. On an error, whatever was started
// is stopped.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if len(cfg.Agents) == 0 {
		return nil, errors.New("stack: no agents")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Stack{natsURL: cfg.NATSURL, cancel: cancel, errs: make(chan error, 1)}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if cfg.DataDir == "" {
		if cfg.DataDir, err = os.MkdirTemp("", "chiffon-stack-"); err != nil {
			return nil, err
		}
		s.tempDir = cfg.DataDir
	}
	if s.natsURL == "" {
		if s.srv, err = broker.StartServer(cfg.Broker); err != nil {
			return nil, err
		}
		s.natsURL = s.srv.ClientURL()
	}

	acs := make([]agent.Config, len(cfg.Agents))
	for i, a := range cfg.Agents {
		acs[i] = s.agentConfig(a.Config, cfg.DataDir, log)
		s.ids = append(s.ids, acs[i].ID)
	}
	oc, err := s.orchestratorConfig(cfg.Orchestrator, cfg.DataDir, acs)
	if err != nil {
		return nil, err
	}
	if oc.Enroll, err = s.joinURLs(oc.Enroll, cfg.JoinHost); err != nil {
		return nil, err
	}
	olog := log.With("daemon", "orchestrator")
	if s.orch, err = orchestrator.Open(oc, orchestrator.Options{Logger: olog, Pages: ui.Pages(oc.HTTP.TLS.Enabled(), olog)}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cmp.Or(oc.HTTP.Listen, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("api listen: %w", err)
	}
	scheme := "http"
	if oc.HTTP.TLS.Enabled() {
		scheme = "https"
	}
	s.apiURL = scheme + "://" + ln.Addr().String()
	s.goRun(func() error { return s.orch.Serve(runCtx, ln) })

	for i, ac := range acs {
		a, err := agent.New(ac)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
		}
		for name, h := range cfg.Agents[i].Handlers {
			a.Handle(name, h)
		}
		s.agents = append(s.agents, a)
		s.goRun(func() error { return a.Run(runCtx) })
	}
	if err := s.waitOnline(ctx, cmp.Or(cfg.OnlineTimeout, defaultOnlineTimeout)); err != nil {
		return nil, err
	}
	return s, nil
}

// agentConfig is c with the stack's defaults filled in.
func (s *Stack) agentConfig(c agent.Config, dataDir string, log *slog.Logger) agent.Config {
	if len(c.NATS.URLs) == 0 {
		c.NATS.URLs = []string{s.natsURL}
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(dataDir, "agents", c.ID)
	}
	if c.Token == "" && c.TokenFile == "" {
		c.Token = broker.NewToken()
	}
	if c.OrchestratorToken == "" && c.OrchestratorTokenFile == "" {
		c.OrchestratorToken = broker.NewToken()
	}
	if c.Logger == nil {
		c.Logger = log.With("agent", c.ID)
	}
	return c
}

// orchestratorConfig is c with the stack's defaults filled in, and keeps the API's
// token for APIToken.
func (s *Stack) orchestratorConfig(c orchestrator.Config, dataDir string, agents []agent.Config) (orchestrator.Config, error) {
	if len(c.NATS.URLs) == 0 {
		c.NATS.URLs = []string{s.natsURL}
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(dataDir, "orchestrator")
	}
	if c.APIToken == "" && c.APITokenFile == "" {
		c.APIToken = broker.NewToken()
	}
	if len(c.Agents) == 0 {
		for _, a := range agents {
			c.Agents = append(c.Agents, policy.AgentConfig{ID: a.ID, Type: envelope.AgentType(a.Type),
				TokenFile: a.TokenFile, OrchestratorTokenFile: a.OrchestratorTokenFile,
				Token: a.Token, OrchestratorToken: a.OrchestratorToken})
		}
	}
	s.apiToken = c.APIToken
	if s.apiToken == "" {
		var err error
		if s.apiToken, err = broker.ReadTokenFile(c.APITokenFile); err != nil {
			return c, err
		}
	}
	return c, nil
}

// joinURLs is e with the broker URLs given to hosts that join: the embedded
// broker's, at host.
func (s *Stack) joinURLs(e orchestrator.EnrollConfig, host string) (orchestrator.EnrollConfig, error) {
	if !e.Enabled() || len(e.NATSURLs) > 0 || s.srv == nil || host == "" {
		return e, nil
	}
	u, err := url.Parse(s.natsURL)
	if err != nil {
		return e, err
	}
	u.Host = net.JoinHostPort(host, u.Port())
	e.NATSURLs = []string{u.String()}
	return e, nil
}

// goRun runs a daemon until the stack stops, and reports its error on errs unless it
// is the stop's own cancellation.
func (s *Stack) goRun(run func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := run(); err != nil && !errors.Is(err, context.Canceled) {
			select {
			case s.errs <- err:
			default: // an earlier error is waiting: Err delivers the first
			}
		}
	}()
}

// waitOnline waits until every agent is online, a daemon fails, ctx ends or timeout
// passes.
func (s *Stack) waitOnline(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("waited %s", timeout))
	defer cancel()
	notOnline := func() error {
		return fmt.Errorf("agents %s not online: %w", strings.Join(s.offline(), ", "), context.Cause(ctx))
	}
	for _, a := range s.agents {
		select {
		case <-a.Ready():
		case err := <-s.errs:
			return err
		case <-ctx.Done():
			return notOnline()
		}
	}
	// An agent is ready once it has sent the heartbeat that makes it routable; the
	// orchestrator takes that in on a goroutine of its own, with nothing to wait on.
	tick := time.NewTicker(onlinePoll)
	defer tick.Stop()
	for len(s.offline()) > 0 {
		select {
		case <-tick.C:
		case err := <-s.errs:
			return err
		case <-ctx.Done():
			return notOnline()
		}
	}
	return nil
}

// offline lists the stack's agents the orchestrator does not list as online.
func (s *Stack) offline() []string {
	online := map[string]bool{}
	for _, a := range s.orch.Agents() {
		online[a.ID] = a.State == "online"
	}
	var out []string
	for _, id := range s.ids {
		if !online[id] {
			out = append(out, id)
		}
	}
	return out
}

// NATSURL is the broker's client URL.
func (s *Stack) NATSURL() string { return s.natsURL }

// APIURL is the orchestrator's HTTP API, such as "http://127.0.0.1:8080".
func (s *Stack) APIURL() string { return s.apiURL }

// APIToken is the bearer token the HTTP API requires.
func (s *Stack) APIToken() string { return s.apiToken }

// AgentIDs lists the agents' ids, in the order of Config.Agents.
func (s *Stack) AgentIDs() []string { return append([]string(nil), s.ids...) }

// Orchestrator is the stack's orchestrator, to submit and wait for tasks without the
// HTTP API.
func (s *Stack) Orchestrator() *orchestrator.Orchestrator { return s.orch }

// Err delivers the first error of a daemon that stopped on its own.
func (s *Stack) Err() <-chan error { return s.errs }

// Stop drains the agents (running work finishes, up to each agent's drain timeout),
// stops the API, closes the orchestrator's store and shuts the embedded broker down,
// in that order, so that every result in flight is recorded; then it removes the
// temporary data dir, if the stack made one. It returns the store's close error. A
// second call does nothing and returns the first's result.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		if s.orch != nil {
			s.stopErr = s.orch.Close()
		}
		if s.srv != nil {
			s.srv.Shutdown()
		}
		if s.tempDir != "" {
			s.stopErr = errors.Join(s.stopErr, os.RemoveAll(s.tempDir))
		}
	})
	return s.stopErr
}

// StopNow makes draining agents cancel their running work at once, such as on a
// second Ctrl-C while Stop waits.
func (s *Stack) StopNow() {
	for _, a := range s.agents {
		a.StopNow()
	}
}
