package broker

import (
	"slices"
	"strings"
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
	// RoleStore is the orchestrator's connection to its JetStream task store
	// (store.kind jetstream): the only identity that may use the JetStream API
	// and write the store's subjects. It serves no request, so no sender can
	// make it publish anywhere.
	RoleStore Role = "store"
)

// Identity is one NATS user of a site.
type Identity struct {
	// Role says which rights the identity gets.
	Role Role
	// Name is the agent id of an agent and the name of a client; "" for the
	// orchestrator and its store.
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
		// Each agent its own subject: the broker vouches for the sender, so the
		// orchestrator answers only into that agent's inbox.
		what: "registry.register.<agent_id>: registration, agent -> orchestrator (request/reply)",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.Register(id.Name))
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Registers())
		},
	},
	{
		what: "registry.heartbeat.<agent_id>: heartbeat, agent -> orchestrator",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleAgent, s.Heartbeat(id.Name))
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleOrchestrator, s.Heartbeats())
		},
	},
	{
		// An agent answers only under its own part of the orchestrator's inbox,
		// and an orchestrator only under the forwarding part: nobody can answer
		// a request that went to someone else, however well it guesses the
		// subject.
		what: "inbox.orch.agent.<agent_id>.> and inbox.orch.fwd.>: answers to the orchestrator's control requests, agent -> orchestrator, and to a standby's forwarded requests, orchestrator -> orchestrator",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return append(ifRole(id, RoleAgent, s.ControlReplies(id.Name)+".>"),
				ifRole(id, RoleOrchestrator, s.ForwardReplies()+".>")...)
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
		// The orchestrator's store connection alone keeps tasks: were an agent
		// or a client able to write here, it could plant or rewrite tasks; were
		// the connection that answers agents able to, a reply subject chosen by
		// a sender could depose the leader or wipe a record. The JetStream API
		// lets the store create, read and purge its stream; its answers come to
		// the store's own inbox.
		what: "store.>: the orchestrator's JetStream task store (store.kind jetstream), and the JetStream API ($JS.API.>)",
		publish: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleStore, s.Store()+".>", "$JS.API.>")
		},
		subscribe: func(s Subjects, id Identity, _ []Identity) []string {
			return ifRole(id, RoleStore, s.StoreInbox()+".>")
		},
	},
}

// Inbox is the inbox prefix of an identity: nats.go makes the reply subjects of
// its requests under it, and only that identity may subscribe there. name is the
// agent id or client name; the orchestrator's and its store's have none. A name
// of "*" makes the pattern of every identity of the role.
func (s Subjects) Inbox(role Role, name string) string {
	switch role {
	case RoleOrchestrator:
		return s.join("inbox", "orch")
	case RoleStore:
		return s.StoreInbox()
	}
	return s.join("inbox", string(role), name)
}

// InInbox reports whether subject lies under the inbox prefix inbox (one more
// token at least): where a daemon may answer a sender whose inbox that is.
func InInbox(subject, inbox string) bool {
	rest, ok := strings.CutPrefix(subject, inbox+".")
	return ok && rest != "" && validLiteralSubject(subject)
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

// AgentMayAnswer reports whether agent agentID may answer a request on reply: an
// orchestrator's task inbox naming agentID, agentID's part of the orchestrator's
// inbox (ControlReplies), or a client's inbox, the client being one the broker
// lets command the agent. An agent answers nothing else, so that nobody who may
// send it a request can make it publish where that sender may not.
func (s Subjects) AgentMayAnswer(agentID, reply string) bool {
	if in, ok := ParseTaskInbox(reply); ok {
		return in.AgentID == agentID && strings.HasPrefix(reply, s.join("orch")+".") && validLiteralSubject(reply)
	}
	return InInbox(reply, s.ControlReplies(agentID)) || InInbox(reply, s.join("inbox", string(RoleClient)))
}
