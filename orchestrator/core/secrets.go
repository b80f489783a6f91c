package core

import (
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/nats-io/nats.go"
)

// secrets are what the core holds for each agent it knows: those of its config
// and those admitted since (Admit). A map is never changed once the core holds
// it: Admit and Forget store a changed copy (admit.go).
type secrets map[string]agentSecrets

// agentSecrets are what the core holds for one agent.
type agentSecrets struct {
	typ envelope.AgentType
	// conf is its entry in the config.
	conf *policy.AgentConfig
	// token is the agent's, checked on what it sends.
	token string
	// header carries the orchestrator's token for the agent and its id (and,
	// in a group, which orchestrator sent it), built once and shared by every
	// message to it (see broker.AuthHeader).
	header nats.Header
}

// newSecrets keeps the tokens of agents, read, for messages naming instance.
func newSecrets(agents []policy.AgentConfig, instance string) secrets {
	s := make(secrets, len(agents))
	for i := range agents {
		s[agents[i].ID] = secretsOf(&agents[i], instance)
	}
	return s
}

// secretsOf are what the core holds for the agent a configures.
func secretsOf(a *policy.AgentConfig, instance string) agentSecrets {
	hdr := broker.AuthHeader(a.OrchestratorToken, a.ID)
	if instance != "" {
		hdr.Set(broker.HeaderInstance, instance)
	}
	return agentSecrets{typ: a.Type, conf: a, token: a.Token, header: hdr}
}

// agentToken is the token the sender naming agent id must present, and whether the
// id is configured: what broker.Authenticator asks.
func (s secrets) agentToken(id string) (string, bool) {
	a, ok := s[id]
	return a.token, ok
}

// config is agent id's entry in the config, or nil: policy.AgentConfig
// without its scan of every agent.
func (s secrets) config(id string) *policy.AgentConfig { return s[id].conf }

// authHeader returns the headers of a message to agentID, and false for an
// agent not in the config, to which nothing may be sent.
func (s secrets) authHeader(agentID string) (nats.Header, bool) {
	a, ok := s[agentID]
	return a.header, ok
}
