package task

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// MarshalStored is json.Marshal without HTML escaping, what both task stores write:
// output text such as "<200>" is stored as written rather than as \u003c escapes
// (readers decode both alike). Task records and events, nearly every write, are
// written by hand (below); anything else, or a record the hand-written path gives
// up on, goes through encoding/json.
func MarshalStored(v any) ([]byte, error) {
	if b, ok := encodeStored(v); ok {
		return b, nil
	}
	return jsonw.AppendValue(nil, v)
}

// Task records and events are written by hand: encoding/json spent most of its time
// on reflection and on time.Time, whose MarshalJSON output it validates again. The
// writer below produces exactly the bytes encoding/json does (HTML escaping off) and
// leaves only free-form values to it. storedjson_test.go fills every field of these
// types by reflection and compares, so a field added to them and missed here fails.

// encodeStored returns v, a *Task, *Event or StoredEvent, as MarshalStored must
// store it; false when v is something else or needs encoding/json (a year outside
// 0-9999, a free-form value encoding/json refuses), which then writes it or reports
// its own error. The buffer is sized once from an estimate, so a record without
// free-form values costs one allocation.
func encodeStored(v any) ([]byte, bool) {
	var w recordWriter
	switch v := v.(type) {
	case *Task:
		if v == nil {
			return nil, false
		}
		w.Buf = make([]byte, 0, taskSize(v))
		w.task(v)
	case *Event:
		if v == nil {
			return nil, false
		}
		w.Buf = make([]byte, 0, eventSize(v))
		w.event(v, 0)
	case StoredEvent:
		if v.Event == nil {
			return nil, false
		}
		w.Buf = make([]byte, 0, eventSize(v.Event))
		w.event(v.Event, v.OutputLen)
	default:
		return nil, false
	}
	return w.Buf, !w.Failed
}

// recordWriter appends a stored record.
type recordWriter struct{ jsonw.Writer }

// task writes t's record, its members in the order of Task's fields.
func (w *recordWriter) task(t *Task) {
	w.Raw("{")
	w.taskRequest(t)
	w.taskProgress(t)
	w.taskTimes(t)
	w.Raw("}")
}

// taskRequest writes what was asked, of whom, and where it comes from: the
// members from "id" to "fire_time".
func (w *recordWriter) taskRequest(t *Task) {
	w.Raw(`"id":`)
	w.String(t.ID)
	w.Raw(`,"state":`)
	w.String(string(t.State))
	w.Raw(`,"to_agent":`)
	w.String(string(t.ToAgent))
	w.Raw(`,"work_type":`)
	w.String(t.WorkType)
	if len(t.Parameters) > 0 {
		w.Raw(`,"parameters":`)
		w.Value(t.Parameters)
	}
	if t.Hints != nil {
		w.Raw(`,"hints":`)
		w.hints(t.Hints)
	}
	w.Raw(`,"agent_id":`)
	w.String(t.AgentID)
	w.Raw(`,"request_id":`)
	w.String(t.RequestID)
	w.Raw(`,"trace_id":`)
	w.String(t.TraceID)
	if t.BatchID != "" {
		w.Raw(`,"batch_id":`)
		w.String(t.BatchID)
	}
	if t.WorkflowRun != "" {
		w.Raw(`,"workflow_run":`)
		w.String(t.WorkflowRun)
	}
	if t.Schedule != "" {
		w.Raw(`,"schedule":`)
		w.String(t.Schedule)
	}
	if t.FireTime != nil {
		w.Raw(`,"fire_time":`)
		w.Time(*t.FireTime)
	}
}

// taskProgress writes how the task went: the members from "attempts" to
// "cancel_requested", each after a comma.
func (w *recordWriter) taskProgress(t *Task) {
	w.Raw(`,"attempts":`)
	w.Int(int64(t.Attempts))
	if len(t.Retries) > 0 {
		w.Raw(`,"retries":[`)
		for i := range t.Retries {
			if i > 0 {
				w.Raw(",")
			}
			w.retry(&t.Retries[i])
		}
		w.Raw("]")
	}
	w.Raw(`,"progress_percent":`)
	w.Int(int64(t.ProgressPercent))
	w.Raw(`,"steps":`)
	w.steps(t.Steps)
	if t.Result != nil {
		w.Raw(`,"result":`)
		w.result(t.Result)
	}
	if t.Error != nil {
		w.Raw(`,"error":`)
		w.taskError(t.Error)
	}
	w.Raw(`,"output_bytes":`)
	w.Int(t.OutputBytes)
	w.Raw(`,"output_complete":`)
	w.Bool(t.OutputComplete)
	if t.OutputCapped {
		w.Raw(`,"output_capped":true`)
	}
	if t.Approval != nil {
		w.Raw(`,"approval":`)
		w.approval(t.Approval)
	}
	if t.CancelRequested {
		w.Raw(`,"cancel_requested":true`)
	}
}

// taskTimes writes the task's times, from "created_at" on, each after a comma.
func (w *recordWriter) taskTimes(t *Task) {
	w.Raw(`,"created_at":`)
	w.Time(t.CreatedAt)
	w.Raw(`,"updated_at":`)
	w.Time(t.UpdatedAt)
	if t.FirstDispatchAt != nil {
		w.Raw(`,"first_dispatch_at":`)
		w.Time(*t.FirstDispatchAt)
	}
	if t.LastAttemptAt != nil {
		w.Raw(`,"last_attempt_at":`)
		w.Time(*t.LastAttemptAt)
	}
	if t.FinishedAt != nil {
		w.Raw(`,"finished_at":`)
		w.Time(*t.FinishedAt)
	}
}

// hints writes the members that are set, each omitted when zero.
func (w *recordWriter) hints(h *Hints) {
	sep := "{"
	if h.MaxDurationSeconds != 0 {
		w.Raw(sep)
		w.Raw(`"max_duration_seconds":`)
		w.Int(h.MaxDurationSeconds)
		sep = ","
	}
	if h.MaxMemoryMB != 0 {
		w.Raw(sep)
		w.Raw(`"max_memory_mb":`)
		w.Int(h.MaxMemoryMB)
		sep = ","
	}
	if h.AgentID != "" {
		w.Raw(sep)
		w.Raw(`"agent_id":`)
		w.String(h.AgentID)
		sep = ","
	}
	if h.GPUVRAMMB != nil {
		w.Raw(sep)
		w.Raw(`"gpu_vram_mb":`)
		w.Int(*h.GPUVRAMMB)
		sep = ","
	}
	if sep == "{" {
		w.Raw("{")
	}
	w.Raw("}")
}

func (w *recordWriter) retry(r *Retry) {
	w.Raw(`{"attempt":`)
	w.Int(int64(r.Attempt))
	w.Raw(`,"code":`)
	w.Int(int64(r.Code))
	w.Raw(`,"message":`)
	w.String(r.Message)
	if r.AgentID != "" {
		w.Raw(`,"agent_id":`)
		w.String(r.AgentID)
	}
	w.Raw(`,"wait_ms":`)
	w.Int(r.WaitMS)
	w.Raw(`,"at":`)
	w.Time(r.At)
	w.Raw("}")
}

// steps writes null for a nil slice, as encoding/json does for a member without
// omitempty, and [] for an empty one.
func (w *recordWriter) steps(steps []StepInfo) {
	if steps == nil {
		w.Raw("null")
		return
	}
	w.Raw("[")
	for i := range steps {
		s := &steps[i]
		if i > 0 {
			w.Raw(",")
		}
		w.Raw(`{"number":`)
		w.Int(s.Number)
		w.Raw(`,"name":`)
		w.String(s.Name)
		w.Raw(`,"status":`)
		w.String(s.Status)
		w.Raw(`,"updated_at":`)
		w.Time(s.UpdatedAt)
		w.Raw("}")
	}
	w.Raw("]")
}

func (w *recordWriter) result(r *Result) {
	w.Raw(`{"status":`)
	w.String(r.Status)
	w.Raw(`,"exit_code":`)
	w.Int(r.ExitCode)
	if r.ResourcesUsed != nil {
		w.Raw(`,"resources_used":`)
		w.resources(r.ResourcesUsed)
	}
	if r.OutputTruncated {
		w.Raw(`,"output_truncated":true`)
	}
	w.Raw(`,"output_total_bytes":`)
	w.Int(r.OutputTotalBytes)
	if len(r.StructuredOutput) > 0 {
		w.Raw(`,"structured_output":`)
		w.Value(r.StructuredOutput)
	}
	if len(r.GPUs) > 0 {
		w.Raw(`,"gpus":`)
		w.gpus(r.GPUs)
	}
	w.Raw(`,"at":`)
	w.Time(r.At)
	w.Raw("}")
}

func (w *recordWriter) gpus(uses []GPUUse) {
	w.Raw("[")
	for i := range uses {
		u := &uses[i]
		if i > 0 {
			w.Raw(",")
		}
		w.Raw(`{"index":`)
		w.Int(int64(u.Index))
		if u.UUID != "" {
			w.Raw(`,"uuid":`)
			w.String(u.UUID)
		}
		if u.Name != "" {
			w.Raw(`,"name":`)
			w.String(u.Name)
		}
		w.Raw(`,"peak_vram_mb":`)
		w.Int(u.PeakMB)
		w.Raw("}")
	}
	w.Raw("]")
}

func (w *recordWriter) resources(r *envelope.ResourcesUsed) {
	w.Raw(`{"duration_seconds":`)
	w.Int(r.DurationSeconds)
	w.Raw(`,"gpu_vram_mb":`)
	w.Int(r.GPUVRAMMB)
	w.Raw(`,"cpu_time_ms":`)
	w.Int(r.CPUTimeMS)
	w.Raw("}")
}

func (w *recordWriter) approval(a *Approval) {
	w.Raw(`{"state":`)
	w.String(a.State)
	w.Raw(`,"why":`)
	w.String(a.Why)
	w.Raw(`,"requested_at":`)
	w.Time(a.RequestedAt)
	w.Raw(`,"expires_at":`)
	w.Time(a.ExpiresAt)
	if a.By != "" {
		w.Raw(`,"by":`)
		w.String(a.By)
	}
	if a.Note != "" {
		w.Raw(`,"note":`)
		w.String(a.Note)
	}
	if a.DecidedAt != nil {
		w.Raw(`,"decided_at":`)
		w.Time(*a.DecidedAt)
	}
	w.Raw("}")
}

func (w *recordWriter) taskError(e *TaskError) {
	w.Raw(`{"code":`)
	w.Int(int64(e.Code))
	w.Raw(`,"message":`)
	w.String(e.Message)
	if len(e.Context) > 0 {
		w.Raw(`,"context":`)
		w.Value(e.Context)
	}
	w.Raw("}")
}

// event writes ev and, when outputLen is not 0, the output_len of its StoredEvent.
func (w *recordWriter) event(ev *Event, outputLen int64) {
	w.Raw(`{"seq":`)
	w.Int(ev.Seq)
	w.Raw(`,"type":`)
	w.String(ev.Type)
	w.Raw(`,"at":`)
	w.Time(ev.At)
	w.Raw(`,"state":`)
	w.String(string(ev.State))
	if ev.Status != nil {
		w.Raw(`,"status":`)
		w.payload(ev.Status)
	}
	if ev.OutputOffset != nil {
		w.Raw(`,"output_offset":`)
		w.Int(*ev.OutputOffset)
	}
	if ev.Result != nil {
		w.Raw(`,"result":`)
		w.payload(ev.Result)
	}
	if len(ev.StructuredOutput) > 0 {
		w.Raw(`,"structured_output":`)
		w.Value(ev.StructuredOutput)
	}
	if ev.Error != nil {
		w.Raw(`,"error":`)
		w.taskError(ev.Error)
	}
	if ev.Message != "" {
		w.Raw(`,"message":`)
		w.String(ev.Message)
	}
	if ev.By != "" {
		w.Raw(`,"by":`)
		w.String(ev.By)
	}
	if outputLen != 0 {
		w.Raw(`,"output_len":`)
		w.Int(outputLen)
	}
	w.Raw("}")
}

// payload appends a work_status or work_result as the envelope carries it.
func (w *recordWriter) payload(p envelope.Payload) {
	var err error
	if w.Buf, err = envelope.AppendPayload(w.Buf, p); err != nil {
		w.Failed = true
	}
}

// The size estimates below add to the widest fixed part of each object (member names,
// numbers, times) its text and free-form values as jsonw guesses them.
const (
	taskFixed = len(`{"id":"","state":"","to_agent":"","work_type":"","agent_id":"","request_id":"","trace_id":"",`+
		`"attempts":,"progress_percent":,"steps":[],"output_bytes":,"output_complete":false,`+
		`"cancel_requested":true,"created_at":,"updated_at":}`) + 3*jsonw.IntSize + 2*jsonw.TimeSize
	// originFixed is what batch_id, workflow_run and schedule take together
	// (fire_time is an optional time).
	originFixed = len(`,"batch_id":"","workflow_run":"","schedule":""`)
	// optionalTimeFixed is one of first_dispatch_at, last_attempt_at, finished_at,
	// fire_time.
	optionalTimeFixed = len(`,"first_dispatch_at":`) + jsonw.TimeSize
	hintsFixed        = len(`,"hints":{"max_duration_seconds":,"max_memory_mb":,"agent_id":"","gpu_vram_mb":}`) + 3*jsonw.IntSize
	retryFixed        = len(`,{"attempt":,"code":,"message":"","agent_id":"","wait_ms":,"at":}`) + 3*jsonw.IntSize + jsonw.TimeSize
	stepFixed         = len(`,{"number":,"name":"","status":"","updated_at":}`) + jsonw.IntSize + jsonw.TimeSize
	resourcesFixed    = len(`,"resources_used":{"duration_seconds":,"gpu_vram_mb":,"cpu_time_ms":}`) + 3*jsonw.IntSize
	resultFixed       = len(`,"result":{"status":"","exit_code":,"output_truncated":true,"output_total_bytes":,"gpus":[],"at":}`) +
		2*jsonw.IntSize + jsonw.TimeSize + resourcesFixed
	gpuFixed   = len(`,{"index":,"uuid":"","name":"","peak_vram_mb":}`) + 2*jsonw.IntSize
	errorFixed = len(`,"error":{"code":,"message":"","context":}`) + jsonw.IntSize
	// approvalFixed is an approval with every member.
	approvalFixed = len(`,"approval":{"state":"","why":"","requested_at":,"expires_at":,"by":"","note":"","decided_at":}`) +
		3*jsonw.TimeSize

	eventFixed = len(`{"seq":,"type":"","at":,"state":"","message":""}`) + jsonw.IntSize + jsonw.TimeSize
	// offsetFixed is what the output_offset of a status event and the output_len of
	// its StoredEvent take together.
	offsetFixed = len(`,"output_offset":,"output_len":`) + 2*jsonw.IntSize
	statusFixed = len(`,"status":{"task_id":"","status":"","progress_percent":,"step":{"number":,"name":"",`+
		`"output":"","output_chunk":""}}`) + 2*jsonw.IntSize
	workResultFixed = len(`,"result":{"task_id":"","status":"","exit_code":,"output":""}`) + jsonw.IntSize + resourcesFixed
)

func taskSize(t *Task) int {
	n := taskFixed
	if len(t.Parameters) > 0 {
		n += len(`,"parameters":`) + jsonw.ValueSize(t.Parameters)
	}
	for _, at := range [...]*time.Time{t.FirstDispatchAt, t.LastAttemptAt, t.FinishedAt, t.FireTime} {
		if at != nil {
			n += optionalTimeFixed
		}
	}
	text := len(t.ID) + len(t.State) + len(t.ToAgent) + len(t.WorkType) + len(t.AgentID) + len(t.RequestID) + len(t.TraceID) +
		len(t.BatchID) + len(t.WorkflowRun) + len(t.Schedule)
	if t.BatchID != "" || t.WorkflowRun != "" || t.Schedule != "" {
		n += originFixed
	}
	if t.Hints != nil {
		n += hintsFixed
		text += len(t.Hints.AgentID)
	}
	for i := range t.Retries {
		n += retryFixed
		text += len(t.Retries[i].Message) + len(t.Retries[i].AgentID)
	}
	for i := range t.Steps {
		n += stepFixed
		text += len(t.Steps[i].Name) + len(t.Steps[i].Status)
	}
	if t.Result != nil {
		n += resultFixed + rawSize(t.Result.StructuredOutput) + len(t.Result.GPUs)*gpuFixed
		text += len(t.Result.Status)
		for _, g := range t.Result.GPUs {
			text += len(g.UUID) + len(g.Name)
		}
	}
	if t.Error != nil {
		n += errorSize(t.Error)
	}
	if a := t.Approval; a != nil {
		n += approvalFixed
		text += len(a.State) + len(a.Why) + len(a.By) + len(a.Note)
	}
	return n + jsonw.TextSize(text)
}

// rawSize is what a structured_output member takes: compacting only shortens it.
func rawSize(raw []byte) int {
	if len(raw) == 0 {
		return 0
	}
	return len(`,"structured_output":`) + len(raw)
}

func errorSize(e *TaskError) int {
	n := errorFixed + jsonw.TextSize(len(e.Message))
	if len(e.Context) > 0 {
		n += jsonw.ValueSize(e.Context)
	}
	return n
}

func eventSize(ev *Event) int {
	n := eventFixed
	text := len(ev.Type) + len(ev.State) + len(ev.Message) + len(ev.By)
	if ev.By != "" {
		n += len(`,"by":""`)
	}
	if ev.OutputOffset != nil {
		n += offsetFixed
	}
	if s := ev.Status; s != nil {
		n += statusFixed
		text += len(s.TaskID) + len(s.Status) + len(s.Step.Name) + len(s.Step.Output) + len(s.Step.OutputChunk)
	}
	if r := ev.Result; r != nil {
		n += workResultFixed
		text += len(r.TaskID) + len(r.Status) + len(r.Output)
	}
	n += rawSize(ev.StructuredOutput)
	if ev.Error != nil {
		n += errorSize(ev.Error)
	}
	return n + jsonw.TextSize(text)
}
