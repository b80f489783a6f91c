// The machine's result rows and a task's end: a work_result ends the task once
// its output is whole, the output is held to max_output_bytes; the end writes
// the final state and steps, and the deadline (hints.max_duration_seconds)
// forces one.

package core

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

// maxReasks bounds how often a result with missing output is asked for again.
const maxReasks = 2

// result applies the result rule: a result that is not truncated holds the whole
// output; a truncated one needs the streamed output whole, or the request is sent
// again so that the agent's cache replays it.
func (m *machine) result(r *run, msg message, res *envelope.WorkResult) {
	t, env := r.t, msg.env
	r.accepted = true
	truncated, total := output.Truncation(env.XCustomFields, res)
	res = m.capResult(r, res, total)
	var replace *string
	if !truncated {
		// r.out holds what the store holds (recover rebuilds it): with no output
		// either side there is nothing to replace.
		if res.Output != "" || !r.out.Empty() {
			replace = &res.Output
		}
		r.out.Replace(int64(len(res.Output)))
		t.OutputBytes, t.OutputComplete = int64(len(res.Output)), !t.OutputCapped
	} else {
		// A capped output is never whole: asking for it again would not help.
		t.OutputComplete = !t.OutputCapped && r.out.Complete(total)
		t.OutputBytes = r.out.Contiguous()
		if !t.OutputComplete && !t.OutputCapped && r.reasks < maxReasks && !t.CancelRequested {
			r.reasks++
			r.log.Warn("truncated result with a gap in the output: asking the agent again",
				"have", t.OutputBytes, "total", total, "reask", r.reasks)
			m.endAttempt(r, nil)
			m.save(r, &task.Event{Type: task.EventState, Message: fmt.Sprintf("output incomplete (%d of %d bytes): asking again", t.OutputBytes, total)})
			r.pinned, r.stick = t.AgentID, t.AgentID // it ran the request: only its cache has the output
			r.out.Restart()
			m.emit(route{})
			return
		}
		if !t.OutputComplete && !t.OutputCapped {
			r.log.Error("output incomplete after asking again", "have", t.OutputBytes, "total", total)
		}
	}
	structured, err := output.Structured(env.XCustomFields)
	if err != nil {
		r.log.Warn("structured output dropped", "err", err)
	}
	gpus, gerr := envelope.GPUUses(env.XCustomFields)
	if gerr != nil {
		r.log.Warn("work_result's gpus ignored", "err", gerr)
	}
	t.Result = &task.Result{Status: res.Status, ExitCode: res.ExitCode, ResourcesUsed: res.ResourcesUsed,
		OutputTruncated: truncated, OutputTotalBytes: total, StructuredOutput: structured,
		GPUs: task.NamedGPUUses(gpus, msg.gpus), At: m.now()}
	if res.Status == envelope.ResultSuccess {
		t.ProgressPercent = 100
	}
	state := map[string]task.State{envelope.ResultSuccess: task.StateSucceeded, envelope.ResultFailed: task.StateFailed,
		envelope.ResultCancelled: task.StateCancelled}[res.Status]
	m.finish(r, state, &task.Event{Type: task.EventResult, Result: res, StructuredOutput: structured}, "", replace)
}

// capOutput marks the task's output capped when cut says bytes past
// max_output_bytes were dropped, the first time, and records why in its history:
// it returns that event, or nil.
func (m *machine) capOutput(r *run, cut bool) *task.Event {
	t := r.t
	if !cut || t.OutputCapped {
		return nil
	}
	t.OutputCapped, t.OutputComplete = true, false
	r.log.Warn("output over max_output_bytes: the rest is dropped", "agent_id", t.AgentID, "max_output_bytes", r.out.Limit)
	ev := &task.Event{Type: task.EventState, Message: fmt.Sprintf("output over max_output_bytes (%d bytes): the rest is dropped", r.out.Limit)}
	m.record(r, ev)
	return ev
}

// capResult cuts the output res carries, bytes [total-len, total) of the whole
// output, at the run's max_output_bytes, and returns res or a copy so cut.
func (m *machine) capResult(r *run, res *envelope.WorkResult, total int64) *envelope.WorkResult {
	limit := r.out.Limit
	if limit <= 0 || total <= limit {
		return res
	}
	c := *res
	c.Output, _ = output.Cut(res.Output, total-int64(len(res.Output)), limit)
	m.capOutput(r, true)
	return &c
}

// finish ends r: its timers stop, its slot is freed, and the final task is written
// (after its whole output, with replace); the end shows to readers and streams once
// that write is committed (finalStored).
func (m *machine) finish(r *run, state task.State, ev *task.Event, msg string, replace *string) {
	t := r.t
	r.finished = true
	m.emit(stopAll{})
	m.unqueue(r)
	m.endAttempt(r, nil)
	now := m.now()
	t.FinishedAt = &now
	if state != task.StateError {
		// A task's error is why it ended in StateError; an attempt's is in Retries.
		t.Error = nil
	}
	t.EndSteps(state, now)
	t.State = state
	if ev == nil {
		ev = &task.Event{Type: task.EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == task.StateError {
		ev.Type, ev.Error = task.EventError, t.Error
	}
	first := r.fresh
	m.write(r, write{record: true, replace: replace, then: func(err error) event {
		return finalStored{ev: ev, uncount: first && err != nil}
	}}, ev)
	r.log.Info("task finished", "state", state, "attempts", t.Attempts, "agent_id", t.AgentID)
}

// finishError ends r in StateError with e.
func (m *machine) finishError(r *run, e *errcodes.Error) {
	r.t.Error = taskError(e)
	m.finish(r, task.StateError, nil, e.Error(), nil)
}

// deadline ends a task that outlived hints.max_duration_seconds, and tells the
// agent to stop it.
func (m *machine) deadline(r *run) {
	t := r.t
	e := timeoutError(r, fmt.Sprintf("task exceeded max_duration_seconds=%d", t.Hints.MaxDurationSeconds))
	switch {
	case t.AgentID != "" && (t.State == task.StateDispatched || t.State == task.StateRunning):
		m.emit(cancelAgent{agentID: t.AgentID, reason: "max_duration_seconds exceeded"})
	case r.pinned != "":
		// Between attempts: the pinned agent may still run an earlier one.
		m.emit(cancelAgent{agentID: r.pinned, reason: "max_duration_seconds exceeded"})
	}
	m.finishError(r, e)
}

func taskError(e *errcodes.Error) *task.TaskError {
	return &task.TaskError{Code: int(e.Code), Message: e.Message, Context: e.Context}
}
