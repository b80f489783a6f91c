package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
)

// Registration retry backoff.
const (
	registerTimeout  = 5 * time.Second
	registerMinRetry = 250 * time.Millisecond
	registerMaxRetry = 30 * time.Second
)

// kickRegister asks the register loop to register again (start, reconnect, discover).
func (a *Agent) kickRegister() {
	select {
	case a.regKick <- struct{}{}:
	default:
	}
}

// registerLoop registers on every kick, retrying with backoff until acknowledged.
func (a *Agent) registerLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.regKick:
		}
		wait := registerMinRetry
		for !a.registerOnce() {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(wait*2, registerMaxRetry)
		}
	}
}

// registerMessage is the agent's registration, with its catalogue in
// x_custom_fields (worktype.Extension).
func (a *Agent) registerMessage() *envelope.Envelope {
	gpus := a.gpu.refresh()
	env := envelope.New(a.agType, envelope.Orchestrator, "", "", &envelope.Register{
		AgentID:             a.cfg.ID,
		Name:                a.cfg.Name,
		SupportedVersions:   envelope.SupportedVersions,
		WorkTypes:           a.WorkTypes(),
		Capabilities:        a.cfg.Capabilities,
		Labels:              a.cfg.Labels,
		MaxConcurrency:      a.cfg.MaxConcurrency,
		HeartbeatIntervalMS: time.Duration(a.cfg.HeartbeatInterval).Milliseconds(),
		Resources:           machineResources(a.cfg.DataDir, gpus),
	})
	env.XCustomFields = envelope.PutGPUs(worktype.Put(env.XCustomFields, a.Catalog()), gpus)
	return env
}

// registerOnce sends one register request and reports whether it was acknowledged.
func (a *Agent) registerOnce() bool {
	data, err := envelope.Encode(a.registerMessage())
	if err != nil {
		a.log.Error("encode register", "err", err)
		return false
	}
	reply, err := a.nc.RequestMsg(a.pub.identifiedMsg(a.subjects.Register(a.cfg.ID), data), registerTimeout)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			a.log.Debug("register: no orchestrator yet")
		} else {
			a.log.Warn("register failed", "err", err)
		}
		return false
	}
	if err := broker.CheckAuth(reply, a.cfg.OrchestratorToken); err != nil {
		// The orchestrator answers a sender it cannot authenticate without its
		// token: most likely this agent's token file differs from the one in the
		// orchestrator's config.
		a.log.Error("register: answer without the orchestrator's token for this agent (is token_file the one the orchestrator has for this id?)",
			"token_status", err.Error())
		return false
	}
	env, err := envelope.Decode(reply.Data)
	if err != nil {
		a.log.Warn("register: bad reply", "err", err)
		return false
	}
	switch p := env.Payload.(type) {
	case *envelope.RegisterAck:
		a.log.Info("registered", "orchestrator_id", p.OrchestratorID, "protocol_version", p.ProtocolVersion)
		a.markHealthy()
		if a.isAccepted() {
			// Registered again (a restarted orchestrator, a reconnect): the work
			// subscription is in place, so say so at once rather than at the
			// next tick.
			a.sendHeartbeat()
		}
		a.acceptedOnce.Do(func() { close(a.accepted) })
		return true
	case *envelope.ErrorPayload:
		a.log.Error("registration refused", "error_code", p.ErrorCode, "error_message", p.ErrorMessage)
		if p.ErrorCode == int(errcodes.AuthenticationFailed) {
			// The orchestrator itself says no (the reply bears its token): another
			// process with this id is live, or the id is bound to another type.
			// Trying again would not change that.
			status, _ := p.ErrorContext[errcodes.KeyTokenStatus].(string)
			select {
			case a.refused <- fmt.Errorf("agent %s: registration refused (%s): %s", a.cfg.ID, status, p.ErrorMessage):
			default:
			}
			return true
		}
	default:
		a.log.Warn("register: unexpected reply", "type", env.Type)
	}
	return false
}

// heartbeatLoop publishes a heartbeat every interval until ctx is done, from the
// moment the agent is subscribed to its work subject: the orchestrator routes work to
// a process from its first heartbeat on, so a heartbeat sent sooner would draw work
// that finds nobody listening.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-a.ready:
	}
	t := time.NewTicker(time.Duration(a.cfg.HeartbeatInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.sendHeartbeat()
		}
	}
}

func (a *Agent) sendHeartbeat() {
	status, ids := a.status()
	gpus := a.gpu.refresh()
	hb := &envelope.Heartbeat{
		AgentID: a.cfg.ID, Status: status, ActiveTasks: len(ids), MaxConcurrency: a.cfg.MaxConcurrency,
		ActiveTaskIDs: ids, Resources: machineResources(a.cfg.DataDir, gpus),
	}
	env := envelope.New(a.agType, envelope.Orchestrator, "", "", hb)
	env.XCustomFields = envelope.PutGPUs(env.XCustomFields, gpus)
	a.pub.publishIdentified(a.subjects.Heartbeat(a.cfg.ID), env)
	a.markHealthy()
}

// onDiscover registers again when the orchestrator asks (it has just started).
// Called by onControl once the message is authenticated.
func (a *Agent) onDiscover() { a.kickRegister() }
