package broker

import (
	"slices"
)

// Role is what a NATS identity is in a Chiffon site.
type Role string

// The roles of a site's identities.
const (
	// RoleOrchestrator sends work and control to every agent and takes the
	// registry.
	RoleOrchestrator Role = "orchestrator"
	// RoleAgent takes work and control on its own subjects and answers them.
	RoleAgent Role = "agent"
	// RoleClient is a script or tool that commands some agents directly, as the
	// orchestrator does (chiffon init --client).
	RoleClient Role = "client"
)

// Identity is one NATS user of a site.
type Identity struct {
	// Role says which rights the identity gets.
	Role Role
	// Name is the agent id of an agent and the name of a client; "" for the
	// orchestrator.
	Name string
	// Agents are the agent ids a client may command; unused for other roles.
	Agents []string
}

// Permissions are an identity's allow lists: whatever they do not name is denied.
type Permissions struct {
	Publish, Subscribe []string
}

// subjectRule is one row of the subject table: a subject pattern and which
// identities may publish and subscribe to it. The pattern gets the prefix and,
// for each identity, the names that identity may use there.
type subjectRule struct {
	// what names the subjects, for documentation and tests.
	what string
	// publish and subscribe return the patterns id may publish or subscribe to
	// (nil: none). site lists every identity, for rules that depend on others.
	publish, subscribe func(s Subjects, id Identity, site []Identity) []string
}

// subjectTable is every subject Chiffon uses and who may use it. Permissions
// derives each identity's allow lists from it alone, so a subject added here is
// added to the broker's configuration, and one missing here is denied.
var subjectTable = []subjectRule{
	{
		what: "agent.<agent_id>.work: work_request, orchestrator or client -> agent",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return commandedAgents(id, s.AgentWork)
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.AgentWork(id.Name))
		},
	},
	{
		what: "agent.<agent_id>.control: cancel, ping, drain, discover",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return commandedAgents(id, s.AgentControl)
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.AgentControl(id.Name))
		},
	},
	{
		what: "orch.<orch_id>.task.<agent_id>.<task_id>.<nonce>: an attempt's statuses and result, agent -> orchestrator",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.OrchTask("*", id.Name, "*", "*"))
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.OrchTasks("*"))
		},
	},
	{
		what: "orch.<orch_id>.api: a standby's API request forwarded to the leader, orchestrator -> orchestrator (request/reply)",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.OrchAPI("*"))
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.OrchAPI("*"))
		},
	},
	{
		what: "registry.register: registration, agent -> orchestrator (request/reply)",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.Register())
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Register())
		},
	},
	{
		what: "registry.heartbeat: heartbeat, agent -> orchestrator",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.Heartbeat())
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Heartbeat())
		},
	},
	{
		what: "inbox.orch.>: replies to the orchestrator's control requests, agent -> orchestrator, and to a standby's forwarded requests, orchestrator -> orchestrator",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return append(ifRole(id, RoleAgent, s.Inbox(RoleOrchestrator, "")+".>"),
				ifRole(id, RoleOrchestrator, s.Inbox(RoleOrchestrator, "")+".>")...)
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Inbox(RoleOrchestrator, "")+".>")
		},
	},
	{
		what: "inbox.agent.<agent_id>.>: replies to an agent's registrations, orchestrator -> agent",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Inbox(RoleAgent, "*")+".>")
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.Inbox(RoleAgent, id.Name)+".>")
		},
	},
	{
		what: "inbox.client.<name>.>: an agent's answers to a client, agent -> client",
		publish: func(s Subjects, id Identity, site []Identity) []string {
			if id.Role != RoleAgent {
				return nil
			}
			var out []string
			for _, c := range site {
				if c.Role == RoleClient && slices.Contains(c.Agents, id.Name) {
					out = append(out, s.Inbox(RoleClient, c.Name)+".>")
				}
			}
			return out
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleClient, s.Inbox(RoleClient, id.Name)+".>")
		},
	},
	{
		// The orchestrator alone keeps tasks: were an agent or a client able to
		// write here, it could plant or rewrite tasks. The JetStream API lets it
		// create, read and purge its stream; its answers come to the orchestrator's
		// inbox.
		what: "store.>: the orchestrator's JetStream task store (store.kind jetstream), and the JetStream API ($JS.API.>)",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Store()+".>", "$JS.API.>")
		},
		subscribe: func(Subjects, Identity, []Identity) []string { return nil },
	},
}

// Inbox is the inbox prefix of an identity: nats.go makes the reply subjects of
// its requests under it, and only that identity may subscribe there. name is the
// agent id or client name; the orchestrator's has none. A name of "*" makes the
// pattern of every identity of the role.
func (s Subjects) Inbox(role Role, name string) string {
	if role == RoleOrchestrator {
		return s.join("inbox", "orch")
	}
	return s.join("inbox", string(role), name)
}

// InboxOf is id's inbox prefix.
func (s Subjects) InboxOf(id Identity) string { return s.Inbox(id.Role, id.Name) }

// Permissions derives id's allow lists from the subject table. site lists every
// identity of the site (id among them): an agent may answer the clients that may
// command it.
func (s Subjects) Permissions(id Identity, site []Identity) Permissions {
	var p Permissions
	for _, r := range subjectTable {
		p.Publish = append(p.Publish, r.publish(s, id, site)...)
		p.Subscribe = append(p.Subscribe, r.subscribe(s, id, site)...)
	}
	return p
}

func ifRole(id Identity, role Role, subjects ...string) []string {
	if id.Role != role {
		return nil
	}
	return subjects
}

// commandedAgents is where id may send work and control: every agent for the
// orchestrator, its own agents for a client.
func commandedAgents(id Identity, subject func(agentID string) string) []string {
	switch id.Role {
	case RoleOrchestrator:
		return []string{subject("*")}
	case RoleClient:
		out := make([]string, 0, len(id.Agents))
		for _, a := range id.Agents {
			out = append(out, subject(a))
		}
		return out
	}
	return nil
}
