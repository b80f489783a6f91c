package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/examples"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/site"
)

// localConfig says where `up` and `demo` run a whole Chiffon on this host.
type localConfig struct {
	// DataDir holds the site's secrets, the broker's config, the orchestrator's store
	// and each agent's cache.
	DataDir string
	// Host is the address the broker and the API listen on.
	Host string
	// NATSPort and HTTPPort are the ports; 0 picks free ones.
	NATSPort, HTTPPort int
	// Operator runs the site in NATS operator mode (site.Spec.Operator): each
	// daemon a .creds, and the orchestrator enrolling new hosts.
	Operator bool
	// Log receives every daemon's logs.
	Log *slog.Logger
}

// localStack is the stack of `up` and `demo`: the embedded broker, the orchestrator
// and one agent of each type, from the example configs. The site's secrets (tokens,
// NATS identities, a CA and the broker's certificate) are made in the data dir on
// first use, as `chiffon init` makes them for several hosts, and the broker runs the
// config that gives each daemon only its rights: no anonymous local process can use
// its port either. Beyond loopback the API serves HTTPS with a certificate of the
// site CA (secrets/api.pem) for site.ListenNames(Host).
func localStack(cfg localConfig) (stack.Config, error) {
	var agents []site.Agent
	var acs []agent.Config
	for _, t := range envelope.AgentTypes {
		ac, err := exampleAgentConfig(string(t))
		if err != nil {
			return stack.Config{}, err
		}
		agents = append(agents, site.Agent{Type: string(t), ID: ac.ID})
		acs = append(acs, ac)
	}
	secrets := filepath.Join(cfg.DataDir, "secrets")
	names := site.ListenNames(cfg.Host)
	// The daemons here dial the broker at Host itself, even a wildcard one. A
	// viewer's token beside the operator's api.token looks at the dashboard
	// read-only.
	spec := site.Spec{Agents: agents, BrokerHosts: append([]string{cfg.Host}, names...), ViewerToken: true, Operator: cfg.Operator}
	if !site.IsLoopback(cfg.Host) {
		// Other hosts reach the API: it serves HTTPS with a certificate of the site
		// CA, as init gives an orchestrator listening beyond loopback.
		spec.APIHosts = names
	}
	st, err := site.Ensure(secrets, spec)
	if err != nil {
		return stack.Config{}, err
	}
	confPath := filepath.Join(cfg.DataDir, "broker.conf")
	listen := net.JoinHostPort(cfg.Host, strconv.Itoa(max(cfg.NATSPort, 0)))
	// In operator mode the broker keeps the account JWTs it is pushed (the
	// revocations) in the data dir.
	brokerFile := st.WithOperator(st.BrokerFile(secrets, listen), filepath.Join(cfg.DataDir, "broker", "jwt"))
	if err := broker.WriteServerFile(confPath, brokerFile); err != nil {
		return stack.Config{}, err
	}
	httpCfg := orchestrator.HTTPConfig{Listen: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.HTTPPort))}
	if spec.APIHosts != nil {
		httpCfg.TLS = orchestrator.TLSConfig{CertFile: filepath.Join(secrets, site.APICert), KeyFile: filepath.Join(secrets, site.APIKey)}
	}
	sc := stack.Config{
		Broker:  broker.ServerConfig{ConfigFile: confPath, Host: cfg.Host, Port: portOrRandom(cfg.NATSPort)},
		DataDir: cfg.DataDir,
		Orchestrator: orchestrator.Config{
			NATS:         st.NATSConfig(broker.Identity{Role: broker.RoleOrchestrator}, nil, secrets),
			APITokenFile: filepath.Join(secrets, site.APIToken),
			APITokens:    []orchestrator.APITokenConfig{{TokenFile: filepath.Join(secrets, site.ViewerToken), Role: orchestrator.RoleViewer}},
			HTTP:         httpCfg,
			Enroll:       upEnrollConfig(st, secrets),
		},
		JoinHost: site.AdvertisedHost(cfg.Host),
		Log:      cfg.Log,
	}
	for _, ac := range acs {
		ac.NATS = st.NATSConfig(broker.Identity{Role: broker.RoleAgent, Name: ac.ID}, nil, secrets)
		ac.TokenFile = filepath.Join(secrets, site.AgentToken(ac.ID))
		ac.OrchestratorTokenFile = filepath.Join(secrets, site.AgentOrchestratorToken(ac.ID))
		ac.DataDir = filepath.Join(cfg.DataDir, "agents", ac.ID)
		sc.Agents = append(sc.Agents, stack.Agent{Config: ac})
	}
	return sc, nil
}

// upEnrollConfig is the orchestrator's enroll section in operator mode: the
// files it signs and revokes identities with, and the site CA a joining host
// is given; none on a site of NKey users.
func upEnrollConfig(st *site.Secrets, secrets string) orchestrator.EnrollConfig {
	a := st.Authority()
	if a == nil {
		return orchestrator.EnrollConfig{}
	}
	return orchestrator.EnrollConfig{AccountSigningKeyFile: a.AccountSigningKeyFile, OperatorSigningKeyFile: a.OperatorSigningKeyFile,
		AccountPublicKey: a.AccountPublicKey, SystemCredsFile: a.SystemCredsFile, CAFile: filepath.Join(secrets, site.CA)}
}

// exampleAgentConfig reads the shipped example config of an agent type.
func exampleAgentConfig(agentType string) (agent.Config, error) {
	b, err := examples.AgentConfig(agentType)
	if err != nil {
		return agent.Config{}, err
	}
	c, err := agent.ParseConfig(b)
	if err != nil {
		return agent.Config{}, fmt.Errorf("example config %s: %w", agentType, err)
	}
	return c, nil
}

// portOrRandom is the broker's Port for a --nats-port: 0 picks a free port even
// though the config file names one.
func portOrRandom(p int) int {
	if p == 0 {
		return -1
	}
	return p
}
