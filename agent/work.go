package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
)

// Limit names of 5005 errors.
const (
	LimitConcurrency = "max_concurrency"
	LimitMemory      = "max_memory_mb"
	LimitDraining    = "draining"
	LimitGPUVRAM     = envelope.LimitGPUVRAM
)

// onWork handles one work_request: the checks of docs/design.md in order, then the
// dedupe cache, then a new task.
func (a *Agent) onWork(msg *nats.Msg) {
	if msg.Reply == "" {
		a.log.Warn("work_request without a reply subject: dropped")
		return
	}
	if a.answerable(msg) == "" {
		return
	}
	if !a.authenticate(msg) {
		return
	}
	env, perr := a.checkRequest(msg)
	if perr != nil {
		a.replyError(msg, env, perr)
		return
	}
	if perr := a.dispatch(msg.Reply, env); perr != nil {
		a.replyError(msg, env, perr)
	}
}

// checkRequest checks an authenticated request's envelope (5003), version (5006)
// and work type (5006). The returned envelope is nil when the message did not
// decode.
func (a *Agent) checkRequest(msg *nats.Msg) (*envelope.Envelope, *errcodes.Error) {
	env, err := envelope.Decode(msg.Data)
	if err != nil {
		var pe *errcodes.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, errcodes.NewInvalidMessage("", "%v", err)
	}
	wr, ok := env.Payload.(*envelope.WorkRequest)
	switch {
	case !ok:
		return env, errcodes.NewInvalidMessage("type", "the work subject takes work_request, got %q", env.Type)
	case env.ToAgent != a.agType:
		return env, errcodes.NewInvalidMessage("to_agent", "this agent is of type %q, got %q", a.agType, env.ToAgent)
	}
	if _, ok := a.handlers[wr.WorkType]; !ok {
		return env, errcodes.NewUnsupportedWorkType(wr.WorkType, a.WorkTypes())
	}
	if _, perr := a.gpuNeed(env); perr != nil {
		return env, perr
	}
	return env, nil
}

// dispatch looks the request up in the dedupe cache and starts it when it is new and
// the agent has room, giving it a GPU when it needs GPU memory. Duplicates skip the
// capacity checks: they run nothing. A refusal is not cached: the request may run
// when sent again.
func (a *Agent) dispatch(reply string, env *envelope.Envelope) *errcodes.Error {
	wr := env.Payload.(*envelope.WorkRequest)
	log := func() *slog.Logger { return a.taskLog(env) } // only the rare paths log
	need, _ := a.gpuNeed(env)                            // checkRequest refused a malformed one
	var gpus []envelope.GPU
	if need > 0 {
		gpus = a.gpu.refresh() // before the lock: nvidia-smi may take a while
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.running[env.RequestID]; ok {
		log().Info("duplicate of a running request: re-attached")
		a.metrics.dedupeHit(dedupeReattached)
		t.stream.attach(reply)
		return nil
	}
	entry, err := a.cache.Get(env.RequestID)
	if err != nil {
		log().Error("dedupe cache", "err", err)
		return errcodes.NewResourceLimitExceeded("dedupe_cache", 0, 1)
	}
	switch {
	case entry != nil && entry.State == dedupe.Finished:
		log().Info("duplicate of a finished request: replaying")
		a.metrics.dedupeHit(dedupeReplayed)
		a.tasks.Add(1)
		go func() { defer a.tasks.Done(); a.replay(reply, env, entry) }()
		return nil
	case entry != nil:
		log().Warn("request was running when the agent stopped: answered as interrupted")
		a.metrics.dedupeHit(dedupeInterrupted)
		a.interrupted(reply, env, entry)
		return nil
	}
	if perr := a.checkCapacityLocked(wr); perr != nil {
		return perr
	}
	var gpu *envelope.GPU
	if need > 0 {
		var perr *errcodes.Error
		if gpu, perr = a.gpu.pool.assign(env.RequestID, need, gpus); perr != nil {
			return perr
		}
	}
	t := a.newTask(reply, env)
	t.req.GPU = gpu
	a.running[env.RequestID] = t
	a.tasks.Add(1)
	// The handler starts once the running entry is committed, so that a crash can
	// never leave a request that ran without a trace. This subscription does not
	// wait for the commit: it takes the next request, whose entry commits with it.
	a.cache.Start(env.RequestID, &dedupe.Entry{TaskID: wr.TaskID,
		WorkType: wr.WorkType, StartedAt: t.started}, func(err error) { go a.started(t, reply, err) })
	return nil
}

// started runs t once its running entry is committed, or refuses it when the entry
// could not be written.
func (a *Agent) started(t *task, reply string, stored error) {
	if stored == nil {
		a.runTask(t)
		return
	}
	defer a.tasks.Done()
	t.cancel(stored)
	t.log.Error("dedupe cache", "err", stored)
	a.gpu.pool.release(t.req.RequestID)
	a.mu.Lock()
	delete(a.running, t.req.RequestID)
	a.mu.Unlock()
	a.replyError(&nats.Msg{Reply: reply}, t.env, errcodes.NewResourceLimitExceeded("dedupe_cache", 0, 1))
}

// checkCapacityLocked answers 5005 when draining, full, or short of memory.
func (a *Agent) checkCapacityLocked(wr *envelope.WorkRequest) *errcodes.Error {
	if a.draining {
		return errcodes.NewResourceLimitExceeded(LimitDraining, 0, 1)
	}
	if n := len(a.running); n >= a.cfg.MaxConcurrency {
		return errcodes.NewResourceLimitExceeded(LimitConcurrency, int64(a.cfg.MaxConcurrency-n), 1)
	}
	if wr.Hints != nil && wr.Hints.MaxMemoryMB > 0 {
		if avail := availableMemoryMB(); avail > 0 && wr.Hints.MaxMemoryMB > avail {
			return errcodes.NewResourceLimitExceeded(LimitMemory, avail, wr.Hints.MaxMemoryMB)
		}
	}
	return nil
}

// authenticate checks that msg carries the orchestrator's token for this agent,
// and refuses it otherwise; it reports whether msg may be handled.
func (a *Agent) authenticate(msg *nats.Msg) bool {
	_, e := a.auth.Check(msg)
	if e == nil {
		return true
	}
	status, _ := e.Context[errcodes.KeyTokenStatus].(string)
	a.authFailures.Add(1)
	a.authLog.Warn("refused:"+status, "message refused: authentication failed", "subject", msg.Subject, "token_status", status)
	// The answer names this agent, whatever id the sender put in its headers.
	refusal := errcodes.NewAuthenticationFailed(a.cfg.ID, status)
	if err := broker.Refuse(a.nc, a.answerable(msg), refusal, a.agType, envelope.Orchestrator); err != nil {
		a.log.Warn("answer 5004", "err", err)
	}
	return false
}

// replyError answers an authenticated request with an error envelope on its reply
// subject.
func (a *Agent) replyError(msg *nats.Msg, env *envelope.Envelope, perr *errcodes.Error) {
	if msg.Reply == "" {
		return // a message that wants no answer, such as a discover
	}
	reqID, traceID := idsOf(env, msg.Data)
	out := envelope.New(a.agType, envelope.Orchestrator, reqID, traceID, envelope.NewErrorPayload(perr))
	log := a.log.With("request_id", reqID, "trace_id", traceID)
	if env != nil {
		log = a.taskLog(env)
	}
	log.Warn("request refused", "error_code", int(perr.Code), "error_message", perr.Message)
	a.pub.publish(msg.Reply, out)
}

// idsOf returns the request and trace ids of env, or of raw JSON that did not decode
// when they are valid there; "" lets envelope.New make fresh ones.
func idsOf(env *envelope.Envelope, data []byte) (string, string) {
	if env != nil {
		return env.RequestID, env.TraceID
	}
	var ids struct {
		RequestID any `json:"request_id"`
		TraceID   any `json:"trace_id"`
	}
	_ = json.Unmarshal(data, &ids)
	return uuidOrEmpty(ids.RequestID), uuidOrEmpty(ids.TraceID)
}

// uuidOrEmpty is v when it is an id (lower-cased), else "".
func uuidOrEmpty(v any) string {
	s, _ := v.(string)
	id, _ := envelope.ParseID(s)
	return id
}

// replay sends a finished request's cached output as chunked statuses, then its
// cached result.
func (a *Agent) replay(reply string, env *envelope.Envelope, e *dedupe.Entry) {
	ws := envelope.WorkStatus{TaskID: e.TaskID, Status: envelope.StatusRunning, ProgressPercent: 100,
		Step: envelope.Step{Number: 0, Name: "replay"}}
	limit := a.pub.maxMessage()
	a.pub.publish(reply, env.Reply(&ws)) // acknowledgement
	err := a.cache.EachPiece(env.RequestID, e, func(off int64, data string) error {
		b := output.Batch{Data: data, Offset: off, Base: off, Total: e.OutputLen, Chunked: true}
		output.Statuses(env, ws, b, limit, func(st []byte) { a.pub.publishEncoded(reply, st) })
		return nil
	})
	if err != nil {
		a.taskLog(env).Error("replay output", "err", err)
	}
	a.pub.publish(reply, resultEnvelope(env, e))
}

// interrupted answers a request found running from an earlier process: a failed
// result with exit code 137, cached so later duplicates replay it.
func (a *Agent) interrupted(reply string, env *envelope.Envelope, e *dedupe.Entry) {
	out := fmt.Sprintf("chiffon: task interrupted: the agent stopped while it ran (started %s); it was not run again\n",
		e.StartedAt.UTC().Format(time.RFC3339))
	e.Result = &envelope.WorkResult{TaskID: e.TaskID, Status: envelope.ResultFailed, ExitCode: 137, Output: out,
		ResourcesUsed: &envelope.ResourcesUsed{}}
	if err := a.cache.Finish(env.RequestID, e, out); err != nil {
		a.taskLog(env).Error("dedupe cache", "err", err)
	}
	ws := envelope.WorkStatus{TaskID: e.TaskID, Status: envelope.StatusRunning,
		Step: envelope.Step{Name: "interrupted", Output: out}}
	st := env.Reply(&ws)
	st.XCustomFields = map[string]any{output.KeyOffset: 0}
	a.pub.publish(reply, st)
	a.pub.publish(reply, resultEnvelope(env, e))
}

// resultEnvelope rebuilds a cached result as a reply to env.
func resultEnvelope(env *envelope.Envelope, e *dedupe.Entry) *envelope.Envelope {
	r := *e.Result
	out := env.Reply(&r)
	if len(e.ResultFields) > 0 {
		out.XCustomFields = e.ResultFields
	}
	return out
}

// answerable returns msg's reply subject when this agent may answer there (see
// broker.Subjects.AgentMayAnswer), else "" with a line logged at a bounded rate.
func (a *Agent) answerable(msg *nats.Msg) string {
	if msg.Reply == "" || a.subjects.AgentMayAnswer(a.cfg.ID, msg.Reply) {
		return msg.Reply
	}
	a.authLog.Warn("foreign-reply", "message not answered: its reply subject is no inbox of a peer of this agent",
		"subject", msg.Subject, "reply", msg.Reply)
	return ""
}
