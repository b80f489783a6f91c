package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/lazylog"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/chiffon-dev/chiffon/worktype"
)

// Causes of a task's context ending.
var (
	errCancelled    = errors.New("cancelled by the orchestrator")
	errDeadline     = errors.New("deadline exceeded")
	errDrainTimeout = errors.New("cancelled: the agent's drain timeout passed")
	errStopped      = errors.New("cancelled: the agent is stopping")
)

// stoppedWork is a handler's error when ctx ended and it stopped its work: the
// cause, and how the work stopped, which the output says after the cause.
type stoppedWork struct {
	cause error
	how   string // such as "SIGTERM sent to the process group; it exited 1.2s later"
}

func (e *stoppedWork) Error() string { return e.cause.Error() + "; " + e.how }
func (e *stoppedWork) Unwrap() error { return e.cause }

// howStopped is the output line saying how the handler stopped its work, when
// err says; else "".
func howStopped(err error) string {
	var s *stoppedWork
	if !errors.As(err, &s) {
		return ""
	}
	return "chiffon: " + s.how + "\n"
}

// Exit codes of tasks that did not end by themselves.
const (
	ExitCancelled   = 130
	ExitDeadline    = 124
	ExitInterrupted = 137
)

// resultOutputMax bounds work_result.output: the whole output up to it, else the tail.
const resultOutputMax = envelope.MaxEnvelopeSize - 64<<10

// task is one running request.
type task struct {
	req     *Request
	env     *envelope.Envelope
	wt      workType
	stream  *taskStream
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelCauseFunc
	started time.Time
}

// taskLog returns a logger carrying a request's ids, formatted only into the lines
// written (see lazylog): most of a task's lines are at debug level.
func (a *Agent) taskLog(env *envelope.Envelope) *slog.Logger {
	if wr, ok := env.Payload.(*envelope.WorkRequest); ok {
		return lazylog.With(a.log, slog.String("request_id", env.RequestID), slog.String("trace_id", env.TraceID),
			slog.String("task_id", wr.TaskID), slog.String("work_type", wr.WorkType))
	}
	return lazylog.With(a.log, slog.String("request_id", env.RequestID), slog.String("trace_id", env.TraceID))
}

func (a *Agent) newTask(reply string, env *envelope.Envelope) *task {
	wr := env.Payload.(*envelope.WorkRequest)
	hints := wr.Hints
	if hints == nil {
		hints = &envelope.Hints{}
	}
	params := wr.Parameters
	if params == nil {
		params = map[string]any{}
	}
	t := &task{
		req: &Request{TaskID: wr.TaskID, RequestID: env.RequestID, TraceID: env.TraceID,
			WorkType: wr.WorkType, Parameters: params, Hints: hints},
		env:     env,
		wt:      a.handlers[wr.WorkType],
		log:     a.taskLog(env),
		started: time.Now(),
	}
	t.stream = newTaskStream(a.pub, env, reply, time.Duration(a.cfg.KeepaliveInterval), a.cfg.MaxOutputBytes)
	t.ctx, t.cancel = context.WithCancelCause(context.Background())
	return t
}

// runTask runs the handler and ends the task: output flushed, result cached, result
// published.
func (a *Agent) runTask(t *task) {
	defer a.tasks.Done()
	defer t.cancel(nil)
	ctx := t.ctx
	if d := t.deadline(); d > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, d, errDeadline)
		defer stop()
	}
	t.log.Debug("task started")
	t.stream.start()
	res, err := callHandler(ctx, t)
	wr, fields := t.finish(ctx, res, err)
	a.metrics.taskFinished(t.req.WorkType, wr.Status, time.Since(t.started))

	out := t.stream.closeOutput()
	wr.ResourcesUsed.DurationSeconds = int64(time.Since(t.started).Round(time.Second) / time.Second)
	var env *envelope.Envelope
	var encoded []byte
	for limit := resultOutputMax; ; limit /= 2 {
		fields = output.TailFields(wr, out, fields, limit)
		env = t.env.Reply(wr)
		if len(fields) > 0 {
			env.XCustomFields = fields
		}
		// Escaping can make the encoded result bigger than a message may be.
		var err error
		if encoded, err = envelope.Encode(env); err != nil || len(encoded) <= a.pub.maxMessage() || limit < 4<<10 {
			break
		}
	}
	entry := &dedupe.Entry{TaskID: t.req.TaskID, WorkType: t.req.WorkType, StartedAt: t.started,
		Result: wr, ResultFields: fields}
	if err := a.cache.Finish(t.req.RequestID, entry, out); err != nil {
		t.log.Error("dedupe cache: result not stored", "err", err)
	}
	// The slot is free before the result says so: the orchestrator sends the next
	// task as soon as it has the result, and must not find the agent still full. A
	// duplicate arriving from now on is answered from the cache.
	a.gpu.pool.release(t.req.RequestID)
	a.mu.Lock()
	delete(a.running, t.req.RequestID)
	a.mu.Unlock()
	t.stream.publishResult(env, encoded)
	t.log.Info("task finished", "status", wr.Status, "exit_code", wr.ExitCode, "output_bytes", len(out))
}

// deadline is the shorter of the request's max_duration_seconds and the work type's
// timeout; 0 means none.
func (t *task) deadline() time.Duration {
	d := time.Duration(t.req.Hints.MaxDurationSeconds) * time.Second
	if t.wt.timeout > 0 && (d == 0 || t.wt.timeout < d) {
		d = t.wt.timeout
	}
	return d
}

// callHandler runs the handler, turning a panic into an error. A work type with
// a schema gets its parameters with the schema's top-level defaults filled in,
// then checked against it.
func callHandler(ctx context.Context, t *task) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	if t.wt.schema != nil {
		t.req.Parameters = worktype.WithDefaults(t.wt.spec.Parameters, t.req.Parameters)
		if err := t.wt.schema.Check(t.req.Parameters); err != nil {
			return Result{ExitCode: ExitInvalidParameters}, err
		}
	}
	return t.wt.handler(ctx, t.req, t.stream)
}

// finish decides the result's status and exit code and appends any final output.
func (t *task) finish(ctx context.Context, res Result, err error) (*envelope.WorkResult, map[string]any) {
	wr := &envelope.WorkResult{TaskID: t.req.TaskID, Status: envelope.ResultSuccess,
		ResourcesUsed: &envelope.ResourcesUsed{CPUTimeMS: res.CPUTime.Milliseconds(), GPUVRAMMB: res.GPUVRAMMB}}
	if res.Output != "" {
		t.stream.appendOutput(res.Output)
	}
	var fields map[string]any
	if res.Structured != nil {
		fields = map[string]any{output.KeyStructured: res.Structured}
	}
	if uses := withAssigned(res.GPUs, t.req.GPU); len(uses) > 0 {
		if fields == nil {
			fields = map[string]any{}
		}
		fields[envelope.KeyGPUs] = uses
	}
	if err == nil && res.ExitCode == 0 {
		return wr, fields
	}
	wr.Status, wr.ExitCode = envelope.ResultFailed, int64(res.ExitCode)
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, errDeadline):
		wr.ExitCode = ExitDeadline
		t.stream.appendOutput(fmt.Sprintf("\nchiffon: deadline of %s exceeded\n%s", t.deadline(), howStopped(err)))
	case ctx.Err() != nil:
		wr.Status = envelope.ResultCancelled
		if wr.ExitCode <= 0 {
			wr.ExitCode = ExitCancelled
		}
		t.stream.appendOutput(fmt.Sprintf("\nchiffon: %v\n%s", cause, howStopped(err)))
	case err != nil:
		t.stream.appendOutput(fmt.Sprintf("\nchiffon: %v\n", err))
	}
	if wr.ExitCode == 0 {
		wr.ExitCode = 1
	}
	return wr, fields
}
