package core

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/catalog"
	"github.com/chiffon-dev/chiffon/orchestrator/gpuroom"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
	"github.com/sony/gobreaker/v2"
)

// missedHeartbeats is how many heartbeat intervals may pass before an agent is offline.
const missedHeartbeats = 3

// agentEntry is what the registry knows of one agent instance. The loop owns it.
type agentEntry struct {
	id, name string
	// instance is the registered process's Chiffon-Instance.
	instance     string
	typ          envelope.AgentType
	versions     []string
	version      string
	workTypes    []string
	capacity     int
	hbInterval   time.Duration
	status       string
	online       bool
	registeredAt time.Time
	lastSeen     time.Time
	lastHB       *time.Time
	reported     int // active tasks as the last heartbeat said
	// resources is what the agent last said its machine has.
	resources *envelope.Resources
	// machineGPUs are its GPUs as it last listed them (x_custom_fields.gpus).
	machineGPUs []envelope.GPU
	labels      map[string]string
	inflight    int // tasks this orchestrator has running there
	// lastDispatch is when this orchestrator last sent it a work_request: ties in
	// routing go to the agent that waited longest.
	lastDispatch time.Time
	breaker      *gobreaker.TwoStepCircuitBreaker[struct{}]
	// unreachable says a work_request to it got "no responders": nothing listens
	// on its work subject. Routing passes it over until it registers again.
	unreachable bool
	offline     *time.Timer
	ping        *time.Timer
	// resend holds the attempts in flight on the process a new one replaced; they
	// are sent again to the new one with its first heartbeat (resendInFlight).
	resend []inFlight
	// conf is its entry in the config: what it may be sent (governance.go).
	conf *policy.AgentConfig
	// cat is what it says of the work types it offers, as the catalogue's
	// latest snapshot holds it (catalog.go).
	cat *catalog.Agent
	// rl are its rate limiters (ratelimit.go).
	rl rateLimits
	// gpu is the GPU memory its attempts in flight hold (gpu.go).
	gpu gpuroom.Holds
}

// inFlight is one attempt of a task: r's attempt number attempt.
type inFlight struct {
	r       *run
	attempt int
}

func (a *agentEntry) stopTimers() {
	if a.offline != nil {
		a.offline.Stop()
	}
	if a.ping != nil {
		a.ping.Stop()
	}
	a.stopWake()
}

func (a *agentEntry) offers(workType string) bool { return slices.Contains(a.workTypes, workType) }

// Agents lists every known or configured agent, by id.
func (o *Core) Agents() []api.AgentInfo {
	var out []api.AgentInfo
	if o.call(func() { out = o.agentInfos() }) != nil {
		return []api.AgentInfo{}
	}
	return out
}

func (o *Core) agentInfos() []api.AgentInfo {
	sec := o.known()
	out := make([]api.AgentInfo, 0, len(sec))
	for id := range sec {
		a := o.agents[id]
		if a == nil {
			out = append(out, api.AgentInfo{ID: id, State: "unknown", Breaker: gobreaker.StateClosed.String(),
				Limits: limitsOf(sec.Config(id))})
			continue
		}
		reg := a.registeredAt
		res, gpus := a.resources, a.machineGPUs
		info := api.AgentInfo{ID: id, Type: a.typ, Name: a.name, State: "offline", Status: a.status,
			Load: a.inflight, Capacity: a.capacity, ReportedActive: a.reported,
			Breaker: a.breaker.State().String(), LastHeartbeat: a.lastHB, ProtocolVersion: a.version,
			WorkTypes: a.workTypes, RegisteredAt: &reg, Resources: res, GPUs: gpus, Labels: a.labels,
			Limits: limitsOf(a.conf)}
		if a.online {
			info.State = "online"
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// handleRegister answers a registration with register_ack and the negotiated version,
// or an error: 5004 for a bad token, for a type other than the one the id is bound
// to, or while another process with the id is live; 5006 with no common version.
func (o *Core) handleRegister(msg *nats.Msg) {
	agentID, env, ok, err := o.receive(msg, broker.SenderOf(msg.Subject))
	if !ok {
		return
	}
	if o.answerable(msg, agentID) == "" {
		return // a registration wants an answer, in the agent's own inbox
	}
	if err != nil {
		o.log.Warn("bad register message", "agent_id", agentID, "err", err)
		o.replyError(msg, agentID, nil, asProtocolError(err))
		return
	}
	reg, ok := env.Payload.(*envelope.Register)
	if !ok || reg.AgentID != agentID || env.FromAgent == envelope.Orchestrator {
		o.replyError(msg, agentID, env, errcodes.NewAuthenticationFailed(agentID, errcodes.TokenInvalid))
		return
	}
	if bound := o.known()[agentID].Type; env.FromAgent != bound {
		o.authLog.Warn("wrong-type", "registration as another type refused", "agent_id", agentID, "agent_type", env.FromAgent, "bound_type", bound)
		o.replyError(msg, agentID, env, errcodes.NewAuthenticationFailed(agentID, errcodes.TokenWrongType))
		return
	}
	version, err := envelope.Negotiate(envelope.SupportedVersions, reg.SupportedVersions)
	if err != nil {
		o.log.Warn("agent speaks no common protocol version", "agent_id", agentID, "versions", reg.SupportedVersions)
		o.replyError(msg, agentID, env, asProtocolError(err))
		return
	}
	declared, err := o.catalogues.FromRegistration(env.XCustomFields, reg.WorkTypes)
	if err != nil {
		o.log.Warn("registration with a bad work type catalogue refused", "agent_id", agentID, "err", err)
		field, detail, _ := strings.Cut(err.Error(), ": ")
		o.replyError(msg, agentID, env, errcodes.NewInvalidMessage(field, "%s", detail))
		return
	}
	if _, gerr := envelope.MachineGPUs(env.XCustomFields); gerr != nil {
		o.log.Warn("registration with a bad GPU list refused", "agent_id", agentID, "err", gerr)
		o.replyError(msg, agentID, env, gerr)
		return
	}
	instance := broker.InstanceOf(msg)
	known := false
	if o.call(func() {
		if a := o.agents[agentID]; a != nil && a.instance == instance {
			o.accept(msg, env, reg, declared, instance, version, true) // the registered process, again
			known = true
		}
	}) != nil || known {
		return
	}
	// A process the registry does not know: probe for another one first, off the
	// subscription's goroutine.
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		switch err := o.probeInstance(agentID, instance); {
		case errors.Is(err, errInstanceLive):
			o.log.Error("second process with a live agent id refused", "agent_id", agentID, "err", err)
			o.replyError(msg, agentID, env, errcodes.NewAuthenticationFailed(agentID, errcodes.TokenInstanceLive))
			return
		case err != nil:
			// Maybe the registering process itself was too slow to answer: a
			// retryable refusal, which the agent meets by registering again.
			o.log.Warn("registration put off: the agent's control subject did not answer", "agent_id", agentID, "err", err)
			o.replyError(msg, agentID, env, errcodes.NewTimeout("registration probe: "+err.Error(), 0, time.Now().UTC()))
			return
		}
		o.post(func() {
			if !o.closed {
				o.accept(msg, env, reg, declared, instance, version, false)
			}
		})
	}()
}

// accept records a registration and answers it.
func (o *Core) accept(msg *nats.Msg, env *envelope.Envelope, reg *envelope.Register,
	declared map[string]worktype.Declared, instance, version string, known bool) {
	agentID := reg.AgentID
	gpus, _ := envelope.MachineGPUs(env.XCustomFields) // checked before
	o.register(env.FromAgent, reg, gpus, declared, instance, version, known)
	rep := env.Reply(&envelope.RegisterAck{AgentID: agentID, OrchestratorID: o.id, ProtocolVersion: version})
	rep.ProtocolVersion = version
	if reply := o.answerable(msg, agentID); reply != "" {
		if err := o.publish(reply, "", agentID, rep); err != nil {
			o.log.Warn("send register_ack", "agent_id", agentID, "err", err)
		}
	}
	a := o.agents[agentID]
	o.log.Info("agent registered", "agent_id", agentID, "agent_type", env.FromAgent,
		"protocol_version", version, "work_types", a.workTypes, "max_concurrency", reg.MaxConcurrency,
		"capacity", a.capacity)
}

// register records a registration. A process the registry knew (it registers
// again after a reconnect) stays routable; a new one becomes routable with its
// first heartbeat, which it sends once it is subscribed to its work subject: work
// sent sooner would find nobody there. Either way the agent is reachable again and
// its breaker closed. The work types it offers are trimmed to those its config
// allows, and its capacity to its config's max_concurrency (governance.go);
// declared, its catalogue, to those work types, and the catalogue's snapshot is
// renewed (catalog.go).
func (o *Core) register(typ envelope.AgentType, reg *envelope.Register, gpus []envelope.GPU,
	declared map[string]worktype.Declared, instance, version string, known bool) {
	now := time.Now().UTC()
	a := o.agents[reg.AgentID]
	if a == nil {
		a = &agentEntry{id: reg.AgentID, registeredAt: now, rl: o.newRateLimits(reg.AgentID)}
		a.breaker = o.newBreaker(a)
		o.metrics.Breaker.WithLabelValues(a.id).Set(0)
		o.agents[reg.AgentID] = a
	}
	if a.instance != instance && a.instance != "" {
		o.log.Warn("agent process replaced", "agent_id", a.id)
		a.resend = o.inFlightOn(a.id)
		// The old process's status (draining, say) and load are not the new one's;
		// its first heartbeat says what they are.
		a.status, a.reported = "", 0
	}
	a.unreachable = false
	o.resetBreaker(a)
	a.instance = instance
	if a.typ != typ { // new, or (not bound to its type) of another type now
		o.byType[a.typ] = slices.DeleteFunc(o.byType[a.typ], func(x *agentEntry) bool { return x == a })
		o.byType[typ] = append(o.byType[typ], a)
	}
	a.typ, a.name, a.versions, a.version = typ, reg.Name, reg.SupportedVersions, version
	a.conf = o.known().Config(a.id)
	a.setRateLimits()
	kept, dropped := a.conf.Allowed(reg.WorkTypes)
	if len(dropped) > 0 {
		o.log.Warn("agent offers work types its config does not allow: it is not sent them",
			"agent_id", a.id, "dropped", dropped, "allowed_work_types", a.conf.AllowedWorkTypes)
	}
	a.workTypes, a.capacity = kept, a.conf.Capacity(reg.MaxConcurrency)
	o.setCatalog(a, declared)
	a.resources, a.machineGPUs, a.labels = reg.Resources, gpus, reg.Labels
	a.gpu.Reported(nil)
	a.hbInterval = time.Duration(reg.HeartbeatIntervalMS) * time.Millisecond
	if a.hbInterval <= 0 {
		a.hbInterval = 5 * time.Second
	}
	if a.status == "" {
		a.status = envelope.AgentIdle
	}
	if !known {
		a.online, a.lastSeen = false, now
		if a.offline != nil {
			a.offline.Stop()
		}
		return
	}
	o.seen(a, now)
	o.drain(a.typ)
}

// seen marks a online and restarts its offline timer; a that was not online
// is told to the readers (AgentOnline).
func (o *Core) seen(a *agentEntry, now time.Time) {
	a.lastSeen = now
	if !a.online {
		defer o.emit(Event{Kind: AgentOnline, AgentID: a.id})
	}
	a.online = true
	if a.offline != nil {
		a.offline.Stop()
	}
	a.offline = time.AfterFunc(missedHeartbeats*a.hbInterval, func() {
		o.post(func() {
			if !o.closed && a.online && time.Since(a.lastSeen) >= missedHeartbeats*a.hbInterval {
				o.goOffline(a)
			}
		})
	})
}

// goOffline marks a offline and fails the attempts in flight there with a timeout:
// a dead agent's tasks are retried now, not when their inactivity timer or
// max_duration_seconds deadline ends them. The retry goes back to the same agent,
// whose dedupe cache alone knows whether the request ran.
func (o *Core) goOffline(a *agentEntry) {
	a.online = false
	o.log.Warn("agent offline: missed heartbeats", "agent_id", a.id, "last_seen", a.lastSeen)
	why := fmt.Sprintf("agent %s offline: no heartbeat for %s", a.id, missedHeartbeats*a.hbInterval)
	for _, f := range o.inFlightOn(a.id) {
		o.deliver(f.r, agentLost{agentID: a.id, attempt: f.attempt, why: why})
	}
}

// handleHeartbeat updates an agent's status and load.
func (o *Core) handleHeartbeat(msg *nats.Msg) {
	agentID, env, ok, err := o.receive(msg, broker.SenderOf(msg.Subject))
	if !ok {
		return
	}
	if err != nil {
		o.log.Warn("bad heartbeat", "agent_id", agentID, "err", err)
		return
	}
	hb, ok := env.Payload.(*envelope.Heartbeat)
	if !ok || hb.AgentID != agentID {
		o.log.Warn("heartbeat for another agent dropped", "agent_id", agentID)
		return
	}
	gpus, gerr := envelope.MachineGPUs(env.XCustomFields)
	if gerr != nil {
		o.log.Warn("heartbeat's GPU list ignored", "agent_id", agentID, "err", gerr)
	}
	instance := broker.InstanceOf(msg)
	o.post(func() { o.heartbeat(agentID, instance, hb, gpus, gerr == nil) })
}

// heartbeat applies an authenticated heartbeat from process instance of agentID,
// with the GPUs it lists when listed is true (a malformed list keeps the last).
func (o *Core) heartbeat(agentID, instance string, hb *envelope.Heartbeat, gpus []envelope.GPU, listed bool) {
	a := o.agents[agentID]
	if a == nil {
		o.log.Debug("heartbeat from an unregistered agent", "agent_id", agentID)
		return
	}
	if a.instance != instance {
		o.log.Debug("heartbeat from another process than the registered one dropped", "agent_id", agentID)
		return
	}
	if a.unreachable {
		// An agent heartbeats only while subscribed to its work subject (and after a
		// reconnect nats.go subscribes again before it publishes): it is reachable.
		a.unreachable = false
		o.log.Info("agent reachable again: it heartbeats", "agent_id", a.id)
	}
	now := time.Now().UTC()
	a.lastHB = &now
	a.status, a.reported = hb.Status, hb.ActiveTasks
	if hb.Resources != nil {
		a.resources = hb.Resources
	}
	if listed {
		a.machineGPUs = gpus
	}
	a.gpu.Reported(hb.ActiveTaskIDs)
	if hb.MaxConcurrency > 0 {
		a.capacity = a.conf.Capacity(hb.MaxConcurrency)
	}
	o.seen(a, now)
	o.resendInFlight(a)
	o.drain(a.typ)
}

// inFlightOn lists the tasks whose current attempt went to agentID and has not
// ended.
func (o *Core) inFlightOn(agentID string) []inFlight {
	var out []inFlight
	for _, r := range o.runs {
		if !r.finished && r.t.AgentID == agentID && (r.t.State == task.StateDispatched || r.t.State == task.StateRunning) {
			out = append(out, inFlight{r, r.attempt})
		}
	}
	return out
}

// resendInFlight sends a's tasks that were in flight on the process it replaced to
// the new one (see machine.resend) at once rather than when their inactivity timer
// fires. It waits for the first heartbeat, not the registration: the agent sends it
// once it is subscribed to its work subject, the same rule that makes a new process
// routable, so the request cannot meet "no responders". Until then the old attempts
// keep their timers, which still end them if no heartbeat comes.
func (o *Core) resendInFlight(a *agentEntry) {
	list := a.resend
	a.resend = nil
	for _, f := range list {
		o.deliver(f.r, agentReplaced{agentID: a.id, version: a.version, attempt: f.attempt})
	}
}

// lastHeartbeat is when agentID last heartbeated, or nil.
func (o *Core) lastHeartbeat(agentID string) *time.Time {
	if a := o.agents[agentID]; a != nil {
		return a.lastHB
	}
	return nil
}

// replyError answers msg, from agentID, with an error envelope when its reply
// subject is agentID's inbox.
func (o *Core) replyError(msg *nats.Msg, agentID string, req *envelope.Envelope, e *errcodes.Error) {
	reply := o.answerable(msg, agentID)
	if reply == "" {
		return
	}
	var rep *envelope.Envelope
	if req != nil && req.FromAgent != envelope.Orchestrator {
		rep = req.Reply(envelope.NewErrorPayload(e))
		rep.ProtocolVersion = envelope.ProtocolVersion
	} else {
		rep = envelope.New(envelope.Orchestrator, envelope.Infra, "", "", envelope.NewErrorPayload(e))
	}
	if err := o.publish(reply, "", agentID, rep); err != nil {
		o.log.Warn("send error reply", "agent_id", agentID, "err", err)
	}
}

// asProtocolError converts err into a protocol error (5003 when it is not one).
func asProtocolError(err error) *errcodes.Error {
	if e, ok := err.(*errcodes.Error); ok {
		return e
	}
	return errcodes.NewInvalidMessage("", "%v", err)
}
