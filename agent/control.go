package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/nats-io/nats.go"
)

// onControl answers cancel, ping and drain with a control_ack, or an error, and
// registers again on discover (which wants no answer). Until the orchestrator
// has accepted this process it answers pings only: they ask whether it is
// there, while cancel and drain are meant for the registered process.
func (a *Agent) onControl(msg *nats.Msg) {
	if msg.Reply != "" && a.answerable(msg) == "" {
		return
	}
	if !a.authenticate(msg) {
		return
	}
	env, err := envelope.Decode(msg.Data)
	if err != nil {
		var pe *errcodes.Error
		if !errors.As(err, &pe) {
			pe = errcodes.NewInvalidMessage("", "%v", err)
		}
		a.replyError(msg, nil, pe)
		return
	}
	if env.Type == envelope.TypeDiscover {
		a.onDiscover()
		return
	}
	if msg.Reply == "" {
		a.log.Warn("control message without a reply subject: dropped", "type", env.Type)
		return
	}
	if env.Type != envelope.TypePing && !a.isAccepted() {
		a.log.Warn("control message before the registration is accepted: dropped", "type", env.Type)
		return
	}
	var ack *envelope.ControlAck
	switch p := env.Payload.(type) {
	case *envelope.Cancel:
		ack = a.cancelTask(p)
	case *envelope.Ping:
		ack = &envelope.ControlAck{OK: true}
	case *envelope.Drain:
		timeout := time.Duration(a.cfg.DrainTimeout)
		if p.TimeoutSeconds > 0 {
			timeout = time.Duration(p.TimeoutSeconds) * time.Second
		}
		a.drain(timeout)
		a.log.Info("draining on request", "timeout", timeout)
		ack = &envelope.ControlAck{OK: true}
	default:
		a.replyError(msg, env, errcodes.NewInvalidMessage("type", "the control subject takes cancel, ping or drain, got %q", env.Type))
		return
	}
	ack.Command = env.Type
	status, ids := a.status()
	ack.AgentStatus, ack.ActiveTasks = status, len(ids)
	out := env.Reply(ack)
	out.FromAgent, out.ToAgent = a.agType, envelope.Orchestrator
	a.pub.publishIdentified(msg.Reply, out)
}

// cancelTask cancels the running task with the given task_id.
func (a *Agent) cancelTask(c *envelope.Cancel) *envelope.ControlAck {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.running {
		if t.req.TaskID == c.TaskID {
			t.log.Info("cancel requested", "reason", c.Reason)
			cause := errCancelled
			if c.Reason != "" {
				// The output ends with it: the operator learns why from the task.
				cause = fmt.Errorf("%w: %s", errCancelled, c.Reason)
			}
			t.cancel(cause)
			return &envelope.ControlAck{OK: true}
		}
	}
	return &envelope.ControlAck{OK: false, Message: "task " + c.TaskID + " is not running here"}
}
