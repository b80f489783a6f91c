package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/examples"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// stackConfig describes a whole Chiffon in one process: an embedded broker, the
// orchestrator and one agent of each type.
type stackConfig struct {
	// DataDir holds tokens, the orchestrator's store and each agent's cache.
	DataDir string
	// Host is the address the broker and the API listen on.
	Host string
	// NATSPort and HTTPPort are the ports; 0 picks free ones.
	NATSPort, HTTPPort int
	// Log receives every daemon's logs.
	Log *slog.Logger
}

// stack is a running single-host Chiffon.
type stack struct {
	NATSURL  string
	APIURL   string
	APIToken string
	Agents   []*agent.Config

	srv    *broker.Server
	orch   *orchestrator.Orchestrator
	agents []*agent.Agent
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startStack starts the broker, the orchestrator with its API, and the four agents.
// The site's secrets (tokens, NATS identities, a CA and the broker's certificate)
// are made in the data dir on first use, as `chiffon init` makes them for several
// hosts, and the broker runs the config that gives each daemon only its rights:
// no anonymous local process can use its port either. Stop ends it.
func startStack(cfg stackConfig) (_ *stack, err error) {
	var agents []initAgent
	var acs []*agent.Config
	for _, t := range envelope.AgentTypes {
		ac, err := exampleAgentConfig(string(t))
		if err != nil {
			return nil, err
		}
		agents = append(agents, initAgent{typ: string(t), id: ac.ID})
		acs = append(acs, ac)
	}
	secrets := filepath.Join(cfg.DataDir, "secrets")
	st, err := ensureSite(secrets, siteSpec{agents: agents, brokerHosts: []string{cfg.Host}})
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(cfg.DataDir, "broker.conf")
	listen := net.JoinHostPort(cfg.Host, strconv.Itoa(max(cfg.NATSPort, 0)))
	if err := broker.WriteServerFile(confPath, st.brokerFile(secrets, listen)); err != nil {
		return nil, err
	}
	srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: confPath, Host: cfg.Host, Port: portOrRandom(cfg.NATSPort)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stack{NATSURL: srv.ClientURL(), srv: srv, cancel: cancel, errs: make(chan error, 8)}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.APIToken, err = broker.ReadTokenFile(filepath.Join(secrets, siteAPIToken)); err != nil {
		return nil, err
	}
	urls := []string{s.NATSURL}
	var agentsAllowed []orchestrator.AgentConfig
	for _, ac := range acs {
		ac.NATS = st.natsConfig(broker.Identity{Role: broker.RoleAgent, Name: ac.ID}, urls, secrets)
		ac.TokenFile = filepath.Join(secrets, agentTokenName(ac.ID))
		ac.OrchestratorTokenFile = filepath.Join(secrets, agentOrchTokenName(ac.ID))
		ac.DataDir = filepath.Join(cfg.DataDir, "agents", ac.ID)
		ac.Logger = cfg.Log.With("agent", ac.ID)
		s.Agents = append(s.Agents, ac)
		agentsAllowed = append(agentsAllowed, orchestrator.AgentConfig{ID: ac.ID, Type: envelope.AgentType(ac.Type),
			TokenFile: ac.TokenFile, OrchestratorTokenFile: ac.OrchestratorTokenFile})
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.HTTPPort)))
	if err != nil {
		return nil, fmt.Errorf("api listen: %w", err)
	}
	s.APIURL = "http://" + ln.Addr().String()
	s.orch, err = orchestrator.Open(orchestrator.Config{
		NATS:         st.natsConfig(broker.Identity{Role: broker.RoleOrchestrator}, urls, secrets),
		DataDir:      filepath.Join(cfg.DataDir, "orchestrator"),
		Agents:       agentsAllowed,
		APITokenFile: filepath.Join(secrets, siteAPIToken),
	}, orchestrator.Options{Logger: cfg.Log.With("daemon", "orchestrator")})
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.goRun(func() error { return s.orch.Serve(ctx, ln) })
	if err := os.WriteFile(filepath.Join(cfg.DataDir, apiURLFile), []byte(s.APIURL+"\n"), 0o644); err != nil {
		return nil, err
	}

	var ready []<-chan struct{}
	for _, ac := range s.Agents {
		a, err := agent.New(*ac)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
		}
		s.agents = append(s.agents, a)
		ready = append(ready, a.Ready())
		s.goRun(func() error { return a.Run(ctx) })
	}
	for _, r := range ready {
		select {
		case <-r:
		case err := <-s.errs:
			return nil, err
		}
	}
	return s, nil
}

func (s *stack) goRun(fn func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
			s.errs <- err
		}
	}()
}

// Err delivers the first error of a daemon that stopped on its own.
func (s *stack) Err() <-chan error { return s.errs }

// Stop drains the agents, stops the API, closes the orchestrator's store and shuts the
// broker down, in that order, so that every result in flight is recorded.
func (s *stack) Stop() {
	s.cancel()
	s.wg.Wait()
	if s.orch != nil {
		_ = s.orch.Close()
	}
	s.srv.Shutdown()
}

// StopNow makes draining agents cancel their running work at once.
func (s *stack) StopNow() {
	for _, a := range s.agents {
		a.StopNow()
	}
}

// exampleAgentConfig reads the shipped example config of an agent type.
func exampleAgentConfig(agentType string) (*agent.Config, error) {
	b, err := examples.AgentConfig(agentType)
	if err != nil {
		return nil, err
	}
	c, err := agent.ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("example config %s: %w", agentType, err)
	}
	return &c, nil
}

func portOrRandom(p int) int {
	if p == 0 {
		return -1
	}
	return p
}
