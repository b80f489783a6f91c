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

// startStack starts the broker, the orchestrator with its API, and the four agents,
// generating tokens in the data dir on first use. Stop ends it.
func startStack(cfg stackConfig) (_ *stack, err error) {
	tokens, err := ensureTokens(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	srv, err := broker.StartServer(broker.ServerConfig{Host: cfg.Host, Port: portOrRandom(cfg.NATSPort)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stack{NATSURL: srv.ClientURL(), APIToken: tokens.api, srv: srv, cancel: cancel, errs: make(chan error, 8)}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	var agentsAllowed []orchestrator.AgentConfig
	for _, t := range envelope.AgentTypes {
		ac, err := exampleAgentConfig(string(t))
		if err != nil {
			return nil, err
		}
		if ac.Token, err = tokens.agent(ac.ID); err != nil {
			return nil, err
		}
		ac.NATS.URLs = []string{s.NATSURL}
		ac.TokenFile = ""
		ac.OrchestratorToken, ac.OrchestratorTokenFile = tokens.orch, ""
		ac.DataDir = filepath.Join(cfg.DataDir, "agents", ac.ID)
		ac.Logger = cfg.Log.With("agent", ac.ID)
		s.Agents = append(s.Agents, ac)
		agentsAllowed = append(agentsAllowed, orchestrator.AgentConfig{ID: ac.ID, Token: ac.Token})
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.HTTPPort)))
	if err != nil {
		return nil, fmt.Errorf("api listen: %w", err)
	}
	s.APIURL = "http://" + ln.Addr().String()
	s.orch, err = orchestrator.Open(orchestrator.Config{
		NATS:     broker.NATSConfig{URLs: []string{s.NATSURL}},
		DataDir:  filepath.Join(cfg.DataDir, "orchestrator"),
		Agents:   agentsAllowed,
		Token:    tokens.orch,
		APIToken: tokens.api,
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
