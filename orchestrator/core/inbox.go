package core

import (
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// isNoResponders reports whether msg has the form of the NATS server's "no
// responders" status: a work_request published where no agent subscribes. Anyone
// who can publish on the subject can give a message that form; the machine
// believes it only on the current attempt's unguessable reply subject.
func isNoResponders(msg *nats.Msg) bool {
	return len(msg.Data) == 0 && msg.Header.Get("Status") == "503"
}

// handleTaskMsg takes every message on the orchestrator's task inboxes: the agents'
// work_status, work_result and error, and the server's no-responders status. It
// authenticates and decodes the message on the subscription's goroutine and posts it
// to the loop as the task's event.
func (o *Core) handleTaskMsg(msg *nats.Msg) {
	inbox, ok := broker.ParseTaskInbox(msg.Subject)
	if !ok {
		o.log.Warn("message on a subject that is no task inbox dropped", "subject", msg.Subject)
		return
	}
	taskID := inbox.TaskID
	if isNoResponders(msg) {
		o.post(func() {
			if r := o.runs[taskID]; r != nil {
				o.deliver(r, noResponders{agentID: inbox.AgentID, nonce: inbox.Nonce, lastHB: o.lastHeartbeat(inbox.AgentID)})
			}
		})
		return
	}
	agentID, env, ok, err := o.receive(msg, inbox.AgentID)
	if !ok {
		return
	}
	if err != nil {
		o.metrics.Invalid.Inc()
		o.log.Warn("invalid message on task inbox dropped", "task_id", taskID, "agent_id", agentID, "err", err)
		return
	}
	if faultDropIncoming(env.Type) {
		return // test builds only: a lost message
	}
	o.post(func() {
		r := o.runs[taskID]
		if r == nil || r.finished {
			o.log.Debug("message for a finished or unknown task dropped", "task_id", taskID, "type", env.Type)
			return
		}
		o.deliver(r, message{agentID: agentID, env: env, gpus: o.agents[agentID].gpus()})
	})
}
