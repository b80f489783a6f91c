package core

import (
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// A daemon that answers whatever reply subject a sender picks is a relay: it
// publishes, with its own rights, where the sender may not. So the orchestrator
// answers an agent only in that agent's own inbox, the agent being the one the
// subject names (registry.register.<id>, registry.heartbeat.<id>, a task inbox
// naming the agent), which the broker lets no one else publish on. Anything else
// gets no answer and a log line at a bounded rate.

// answerable returns msg's reply subject when it lies in the inbox of agentID,
// the sender the broker vouches for; otherwise "" (no answer), logged at a
// bounded rate and counted when msg asked for an answer.
func (o *Core) answerable(msg *nats.Msg, agentID string) string {
	if msg.Reply == "" {
		return ""
	}
	if agentID != "" && broker.InInbox(msg.Reply, o.subj.InboxOf(broker.Identity{Role: broker.RoleAgent, Name: agentID})) {
		return msg.Reply
	}
	o.metrics.ForeignReplies.Inc()
	o.authLog.Warn("foreign-reply", "message not answered: its reply subject is not its sender's inbox",
		"subject", msg.Subject, "agent_id", agentID, "reply", msg.Reply)
	return ""
}
