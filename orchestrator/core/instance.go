package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/nats-io/nats.go"
)

// One live process per agent id. An agent subscribes to its control subject
// before it registers, and to its work subject only once it is accepted. A
// registration from a process the registry does not know (its Chiffon-Instance
// header) is accepted only after a ping on the control subject finds no other
// process there: an agent restarted after a crash is accepted, since its old
// connection, and with it the old subscription, is gone; a second process
// started beside a live one is refused before it ever sees work.

// errInstanceLive says another process with the agent's id answered a probe.
var errInstanceLive = errors.New("another process with this agent id answers on its control subject")

// errProbeUnanswered says a process is subscribed to the agent's control subject
// but nobody answered the probe: a hung process, or the registering one too slow.
// The registration is refused for now, and the agent tries again.
var errProbeUnanswered = errors.New("a process is subscribed to the agent's control subject but did not answer a ping")

// probeInstance pings agentID's control subject and collects every answer: it
// fails with errInstanceLive when a process other than instance answers, and with
// errProbeUnanswered when nobody answers within the control timeout (a subscriber
// that does not answer is hung, not gone). It waits for answers, so it runs off the loop.
func (o *Core) probeInstance(agentID, instance string) error {
	sec := o.known()
	hdr, ok := sec.Header(agentID)
	if !ok {
		return errUnknownAgent
	}
	env := envelope.New(envelope.Orchestrator, sec[agentID].Type, "", "", &envelope.Ping{})
	data, err := envelope.Encode(env)
	if err != nil {
		return err
	}
	call, err := o.req.Send(&nats.Msg{Subject: o.subj.AgentControl(agentID), Data: data, Header: hdr}, o.subj.ControlReplies(agentID))
	if err != nil {
		return err
	}
	defer call.Close()
	deadline := time.Now().Add(o.cfg.Timeouts.Control)
	selfSeen := false
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		msg, err := call.Next(ctx)
		cancel()
		if errors.Is(err, nats.ErrNoResponders) {
			return nil // no process at all: the registering one has not subscribed
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if selfSeen {
				return nil
			}
			return fmt.Errorf("%w within %s", errProbeUnanswered, o.cfg.Timeouts.Control)
		}
		if err != nil {
			return err
		}
		if id, aerr := o.authenticate(msg); aerr != nil || id != agentID {
			o.metrics.AuthFailures.Inc()
			continue
		}
		if broker.InstanceOf(msg) != instance {
			return errInstanceLive
		}
		if !selfSeen {
			// The registering process answered; give any other one a moment.
			selfSeen = true
			deadline = time.Now().Add(o.cfg.Timeouts.InstanceProbe)
		}
	}
}
