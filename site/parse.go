package site

import (
	"errors"
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
)

// ParseAgents reads chiffon init's --agents values: a type, whose agent's
// id is <type>-1, or type=id.
func ParseAgents(specs []string) ([]Agent, error) {
	var out []Agent
	seen := map[string]bool{}
	for _, s := range specs {
		typ, id, ok := strings.Cut(strings.TrimSpace(s), "=")
		if !ok {
			id = typ + "-1"
		}
		if t := envelope.AgentType(typ); !t.Valid() || t == envelope.Orchestrator {
			return nil, fmt.Errorf("%q is not an agent type (infra, desktop, code, research)", typ)
		}
		if msg := envelope.CheckAgentID(id); msg != "" {
			return nil, fmt.Errorf("agent id %q %s", id, msg)
		}
		if seen[id] {
			return nil, fmt.Errorf("agent id %q given twice", id)
		}
		seen[id] = true
		out = append(out, Agent{Type: typ, ID: id})
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one agent")
	}
	return out, nil
}

// ParseClients reads chiffon init's --client values: NAME, or NAME=id,id,
// each id one of agents.
func ParseClients(specs []string, agents []Agent) ([]Client, error) {
	known := map[string]bool{}
	for _, a := range agents {
		known[a.ID] = true
	}
	var out []Client
	seen := map[string]bool{}
	for _, s := range specs {
		name, ids, limited := strings.Cut(strings.TrimSpace(s), "=")
		if msg := envelope.CheckAgentID(name); msg != "" {
			return nil, fmt.Errorf("client name %q %s", name, msg)
		}
		if seen[name] {
			return nil, fmt.Errorf("client %q given twice", name)
		}
		seen[name] = true
		c := Client{Name: name, Agents: AgentIDs(agents)}
		if limited {
			c.Agents = nil
			for _, id := range strings.Split(ids, ",") {
				if id = strings.TrimSpace(id); !known[id] {
					return nil, fmt.Errorf("client %q: %q is not an agent of --agents", name, id)
				}
				c.Agents = append(c.Agents, id)
			}
		}
		out = append(out, c)
	}
	return out, nil
}
