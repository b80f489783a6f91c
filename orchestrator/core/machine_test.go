package core

// The task lifecycle as tables: each row takes a run in one named starting state,
// applies one event and checks the task's state, the run's flags and the effects, in
// order. The machine is pure, so no NATS, store or timer is involved: time is a fixed
// clock and nonces count up.

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

var (
	mtNow   = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mtRetry = policy.RetryConfig{Initial: time.Second, Max: 4 * time.Second, MaxRetries: 3}
	errBoom = errors.New("boom")
)

const (
	mtTaskID  = "t1"
	mtReqID   = "req-1"
	mtTraceID = "trace-1"
)

func newTestMachine() *machine {
	n := 0
	return &machine{
		timeouts: policy.TimeoutConfig{Ack: 2 * time.Second, Inactivity: 3 * time.Second, DeadlineGrace: 5 * time.Second},
		now:      func() time.Time { return mtNow },
		nonce:    func() string { n++; return "n" + strconv.Itoa(n) },
	}
}

// newTestRun is a run of t as newRun makes it: its backoff goes on from t's retries.
func newTestRun(t *task.Task) *run {
	return &run{t: t, log: slog.New(slog.DiscardHandler), bo: backoffFor(mtRetry, len(t.Retries))}
}

// freshTask is a task as Submit makes it; its deadline is 60 s.
func freshTask() *task.Task {
	return &task.Task{ID: mtTaskID, State: task.StatePending, ToAgent: envelope.Infra, WorkType: "shell",
		Parameters: map[string]any{"cmd": "true"}, Hints: &task.Hints{MaxDurationSeconds: 60},
		RequestID: mtReqID, TraceID: mtTraceID, Steps: []task.StepInfo{}, CreatedAt: mtNow, UpdatedAt: mtNow}
}

// ---- Events ----

func agentMsg(agentID, requestID string, p envelope.Payload) message {
	return message{agentID: agentID, env: envelope.New(envelope.Infra, envelope.Orchestrator, requestID, mtTraceID, p)}
}

// status is a work_status of step 1 from agentID.
func statusMsg(agentID, out string) message {
	return agentMsg(agentID, mtReqID, &envelope.WorkStatus{TaskID: mtTaskID, Status: envelope.StatusRunning,
		ProgressPercent: 10, Step: envelope.Step{Number: 1, Name: "build", Output: out}})
}

func resultMsg(st, out string) message {
	return agentMsg("a1", mtReqID, &envelope.WorkResult{TaskID: mtTaskID, Status: st, Output: out})
}

// statusAtMsg is a work_status of step 1 from a1 whose output goes at off.
func statusAtMsg(out string, off int64) message {
	msg := statusMsg("a1", out)
	msg.env.XCustomFields = map[string]any{output.KeyOffset: off}
	return msg
}

// truncated is a work_result carrying only the last bytes of a total-byte output.
func truncatedMsg(st, tail string, total int64) message {
	msg := resultMsg(st, tail)
	msg.env.XCustomFields = map[string]any{output.KeyTruncated: true, output.KeyTotalBytes: total}
	return msg
}

func errorMsg(e *errcodes.Error) message {
	return agentMsg("a1", mtReqID, envelope.NewErrorPayload(e))
}

var (
	errUnavailable = errcodes.NewAgentUnavailable("no online infra agent offers work type \"shell\"", "", nil)
	errUnsupported = errcodes.NewUnsupportedWorkType("shell", []string{"python"})
	errInvalid     = errcodes.NewInvalidMessage("payload.work_type", "must not be empty")
	ackTimeout     = "no acknowledgement within 2s"
	idleTimeout    = "no message for 3s"
)

// ---- Starting states ----

// mustApply applies ev and fails unless the task ends up in want.
func mustApply(t *testing.T, m *machine, r *run, ev event, want task.State) []effect {
	t.Helper()
	effs := m.apply(r, ev)
	if r.t.State != want {
		t.Fatalf("building the state: %T left the task %s, want %s (effects %q)", ev, r.t.State, want, describe(effs))
	}
	return effs
}

// storedEvent is the event the dispatch's write hands back once committed.
func storedEvent(t *testing.T, effs []effect) event {
	t.Helper()
	w := effectOf[write](t, effs)
	if w.then == nil {
		t.Fatal("the dispatch's write has no then")
	}
	return w.then(nil)
}

func stNew(*testing.T, *machine) *run { return newTestRun(freshTask()) }

// stRouting: submitted, the routing answer not applied yet.
func stRouting(t *testing.T, m *machine) *run {
	r := stNew(t, m)
	mustApply(t, m, r, submitted{}, task.StatePending)
	return r
}

func stQueued(t *testing.T, m *machine) *run {
	r := stRouting(t, m)
	mustApply(t, m, r, routed{queue: true}, task.StatePending)
	return r
}

// stDispatched: written as dispatched to a1, the write not committed yet.
func stDispatched(t *testing.T, m *machine) *run {
	r := stRouting(t, m)
	mustApply(t, m, r, routed{agentID: "a1", version: "1.0"}, task.StateDispatched)
	return r
}

// stDispatchedStored: the dispatch is committed and its work_request published.
func stDispatchedStored(t *testing.T, m *machine) *run {
	r := stRouting(t, m)
	effs := mustApply(t, m, r, routed{agentID: "a1", version: "1.0"}, task.StateDispatched)
	mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
	return r
}

func stRunning(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, statusMsg("a1", ""), task.StateRunning)
	return r
}

// stStreamed: running, with the whole 10-byte output streamed.
func stStreamed(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, statusMsg("a1", "0123456789"), task.StateRunning)
	return r
}

// mtMaxOutput is the max_output_bytes of "capped", which holds 10 bytes.
const mtMaxOutput = 16

// stCapped: "streamed", with max_output_bytes set to mtMaxOutput.
func stCapped(t *testing.T, m *machine) *run {
	r := stStreamed(t, m)
	r.out.Limit = mtMaxOutput
	return r
}

func stCancelRequested(t *testing.T, m *machine) *run {
	r := stRunning(t, m)
	mustApply(t, m, r, cancelRequested{reason: "op", answered: make(chan struct{})}, task.StateRunning)
	return r
}

func stCancelDispatched(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, cancelRequested{answered: make(chan struct{})}, task.StateDispatched)
	return r
}

// stFinished: succeeded, its final write not committed yet.
func stFinished(t *testing.T, m *machine) *run {
	r := stRunning(t, m)
	mustApply(t, m, r, resultMsg(envelope.ResultSuccess, "done"), task.StateSucceeded)
	return r
}

// stRetryWait: the work_request could not be published; the retry may go anywhere.
func stRetryWait(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, sendFailed{attempt: 1, err: errBoom}, task.StatePending)
	return r
}

// stRetryWaitPinned: the attempt timed out on a1, which may have run it.
func stRetryWaitPinned(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, silence{gen: r.gen, why: ackTimeout}, task.StatePending)
	return r
}

// stPinnedDispatched: the retry of a timed-out attempt, published to a1.
func stPinnedDispatched(t *testing.T, m *machine) *run {
	r := stRetryWaitPinned(t, m)
	mustApply(t, m, r, retryDue{attempt: 1}, task.StatePending)
	effs := mustApply(t, m, r, routed{agentID: "a1", version: "1.0"}, task.StateDispatched)
	mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
	return r
}

// stRequeued: a1 did not receive the work_request; back in the queue.
func stRequeued(t *testing.T, m *machine) *run {
	r := stDispatchedStored(t, m)
	mustApply(t, m, r, noResponders{agentID: "a1", nonce: "n1"}, task.StatePending)
	return r
}

// storedRun is a run of a task read back from the store at Open, with seq events.
func storedRun(seq int64, edit func(t *task.Task)) *run {
	tk := freshTask()
	tk.Steps = nil
	edit(tk)
	r := newTestRun(tk)
	r.seq = seq
	return r
}

func inStore(state task.State, agentID string) func(*task.Task) {
	return func(t *task.Task) {
		t.State, t.AgentID = state, agentID
		if agentID != "" {
			first := mtNow.Add(-10 * time.Second)
			t.Attempts, t.FirstDispatchAt, t.LastAttemptAt = 1, &first, &first
		}
	}
}

func stStoredDispatched(*testing.T, *machine) *run {
	return storedRun(2, inStore(task.StateDispatched, "a1"))
}

func stStoredRunning(*testing.T, *machine) *run {
	return storedRun(3, func(t *task.Task) {
		inStore(task.StateRunning, "a1")(t)
		t.Steps = []task.StepInfo{{Number: 1, Name: "build", Status: envelope.StatusRunning, UpdatedAt: mtNow}}
	})
}

func stStoredDispatchedCancel(*testing.T, *machine) *run {
	return storedRun(3, func(t *task.Task) { inStore(task.StateDispatched, "a1")(t); t.CancelRequested = true })
}

func stStoredPending(*testing.T, *machine) *run {
	return storedRun(1, inStore(task.StatePending, ""))
}

func stStoredPendingCancel(*testing.T, *machine) *run {
	return storedRun(1, func(t *task.Task) { inStore(task.StatePending, "")(t); t.CancelRequested = true })
}

// stStoredTimedOut: waiting for its retry after a timeout on a1.
func stStoredTimedOut(*testing.T, *machine) *run {
	return storedRun(4, func(t *task.Task) {
		inStore(task.StatePending, "a1")(t)
		t.Retries = []task.Retry{{Attempt: 1, Code: int(errcodes.Timeout), Message: ackTimeout, AgentID: "a1", WaitMS: 1000}}
	})
}

// stStoredUnreached: queued again after a1 had no responders.
func stStoredUnreached(*testing.T, *machine) *run {
	return storedRun(3, inStore(task.StatePending, "a1"))
}

func stResumedQueued(t *testing.T, m *machine) *run {
	r := stStoredPending(t, m)
	mustApply(t, m, r, resumed{}, task.StatePending)
	return r
}

// stResumedPinned: resumed on its agent, the routing answer not applied yet.
func stResumedPinned(t *testing.T, m *machine) *run {
	r := stStoredDispatched(t, m)
	mustApply(t, m, r, resumed{}, task.StateDispatched)
	return r
}

// withApproval: a new task that needs an operator's yes, asked now for an hour.
func withApproval(t *task.Task) *task.Task {
	t.Approval = &task.Approval{State: task.ApprovalWaiting, Why: "work type shell requires approval", RequestedAt: mtNow,
		ExpiresAt: mtNow.Add(time.Hour)}
	return t
}

func stNewApproval(*testing.T, *machine) *run { return newTestRun(withApproval(freshTask())) }

// stAwaiting: submitted, waiting for its approval.
func stAwaiting(t *testing.T, m *machine) *run {
	r := stNewApproval(t, m)
	mustApply(t, m, r, submitted{by: "op"}, task.StateAwaitingApproval)
	return r
}

// stStoredAwaiting: read from the store, waiting for its approval for 30 more
// minutes.
func stStoredAwaiting(*testing.T, *machine) *run {
	return storedRun(2, func(t *task.Task) {
		withApproval(t)
		t.State, t.Approval.ExpiresAt = task.StateAwaitingApproval, mtNow.Add(30*time.Minute)
	})
}

// machineStates are the starting states of the tables, by name.
var machineStates = map[string]func(*testing.T, *machine) *run{
	"new":                   stNew,
	"routing":               stRouting,
	"queued":                stQueued,
	"dispatched":            stDispatched,
	"dispatched-stored":     stDispatchedStored,
	"running":               stRunning,
	"streamed":              stStreamed,
	"capped":                stCapped,
	"cancel-requested":      stCancelRequested,
	"cancel-dispatched":     stCancelDispatched,
	"finished":              stFinished,
	"retry-wait":            stRetryWait,
	"retry-wait-pinned":     stRetryWaitPinned,
	"pinned-dispatched":     stPinnedDispatched,
	"requeued":              stRequeued,
	"stored-dispatched":     stStoredDispatched,
	"stored-running":        stStoredRunning,
	"stored-dispatched-cxl": stStoredDispatchedCancel,
	"stored-pending":        stStoredPending,
	"stored-pending-cxl":    stStoredPendingCancel,
	"stored-timed-out":      stStoredTimedOut,
	"stored-unreached":      stStoredUnreached,
	"resumed-queued":        stResumedQueued,
	"resumed-pinned":        stResumedPinned,
	"new-approval":          stNewApproval,
	"awaiting":              stAwaiting,
	"stored-awaiting":       stStoredAwaiting,
}

// TestMachineStartingStates checks what each starting state is, so that a row's
// expectations read against a known run.
func TestMachineStartingStates(t *testing.T) {
	want := map[string]string{
		"new":                   "pending attempt=0",
		"routing":               "pending attempt=0",
		"queued":                "pending attempt=0 queued",
		"dispatched":            "dispatched attempt=1",
		"dispatched-stored":     "dispatched attempt=1",
		"running":               "running attempt=1 accepted",
		"streamed":              "running attempt=1 accepted",
		"capped":                "running attempt=1 accepted",
		"cancel-requested":      "running attempt=1 accepted",
		"cancel-dispatched":     "dispatched attempt=1",
		"finished":              "succeeded attempt=1 finished accepted",
		"retry-wait":            "pending attempt=1 avoid=a1",
		"retry-wait-pinned":     "pending attempt=1 pinned=a1 stick=a1",
		"pinned-dispatched":     "dispatched attempt=2 pinned=a1 stick=a1",
		"requeued":              "pending attempt=1 queued avoid=a1",
		"stored-dispatched":     "dispatched attempt=0",
		"stored-running":        "running attempt=0",
		"stored-dispatched-cxl": "dispatched attempt=0",
		"stored-pending":        "pending attempt=0",
		"stored-pending-cxl":    "pending attempt=0",
		"stored-timed-out":      "pending attempt=0",
		"stored-unreached":      "pending attempt=0",
		"resumed-queued":        "pending attempt=0 queued",
		"resumed-pinned":        "dispatched attempt=0 pinned=a1 stick=a1",
		"new-approval":          "pending attempt=0",
		"awaiting":              "awaiting_approval attempt=0",
		"stored-awaiting":       "awaiting_approval attempt=0",
	}
	for _, name := range stateNames() {
		t.Run(name, func(t *testing.T) {
			r := machineStates[name](t, newTestMachine())
			if got := string(r.t.State) + " " + runFlags(r); got != want[name] {
				t.Errorf("got %q, want %q", got, want[name])
			}
		})
	}
}

func stateNames() []string {
	names := make([]string, 0, len(machineStates))
	for name := range machineStates {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ---- Rendering ----

// describe renders effects as short strings, in order.
func describe(effs []effect) []string {
	out := make([]string, 0, len(effs))
	for _, eff := range effs {
		var s string
		switch e := eff.(type) {
		case write:
			parts := []string{}
			if e.record {
				parts = append(parts, "record")
			}
			if len(e.events) == 1 {
				parts = append(parts, "1 event")
			} else {
				parts = append(parts, fmt.Sprintf("%d events", len(e.events)))
			}
			if e.piece != (task.Piece{}) {
				parts = append(parts, "piece")
			}
			if e.replace != nil {
				parts = append(parts, "replace")
			}
			s = "write(" + strings.Join(parts, ",") + ")"
		case publish:
			s = "publish(" + e.agentID + ")"
		case claim:
			s = "claim(" + e.agentID + ")"
		case release:
			var parts []string
			if e.drain {
				parts = append(parts, "drain")
			}
			if e.outcome != nil {
				parts = append(parts, outcomeName(e.outcome))
			}
			s = "release"
			if len(parts) > 0 {
				s += "(" + strings.Join(parts, ",") + ")"
			}
		case settle:
			s = "settle(" + outcomeName(e.outcome) + ")"
		case arm:
			s = fmt.Sprintf("arm(%s,%s)", timerName(e.kind), e.after)
		case stop:
			s = "stop(" + timerName(e.kind) + ")"
		case stopAll:
			s = "stopAll"
		case notify:
			s = "notify(" + e.ev.Type + ")"
		case enqueue:
			s = "enqueue(tail)"
			if e.head {
				s = "enqueue(head)"
			}
		case unqueue:
			s = "unqueue"
		case route:
			s = "route"
			if e.unlessOnline {
				s = "route(unlessOnline)"
			}
		case drain:
			s = "drain"
		case cancelAgent:
			s = "cancelAgent(" + e.agentID + ")"
			if e.answered != nil {
				s = "cancelAgent(" + e.agentID + ",answer)"
			}
		case unreachable:
			s = "unreachable(" + e.agentID + ")"
		case forged:
			s = "forged"
		case acknowledged:
			s = "acknowledged"
		case retried:
			s = "retried(" + strconv.Itoa(e.code) + ")"
		case rejected:
			s = "rejected"
		case asked:
			s = "asked"
		case forget:
			s = "forget"
			if e.uncount {
				s = "forget(uncount)"
			}
		default:
			s = fmt.Sprintf("%T", eff)
		}
		out = append(out, s)
	}
	return out
}

func outcomeName(err error) string {
	var e *errcodes.Error
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, errNeverReached):
		return "never-reached"
	case errors.As(err, &e):
		return strconv.Itoa(int(e.Code))
	}
	return err.Error()
}

func timerName(k timerKind) string {
	return [...]string{"silence", "deadline", "retry", "queue", "approval"}[k]
}

// runFlags renders the run's flags that the rows check.
func runFlags(r *run) string {
	s := "attempt=" + strconv.Itoa(r.attempt)
	for _, f := range []struct {
		on   bool
		name string
	}{{r.finished, "finished"}, {r.queued, "queued"}, {r.accepted, "accepted"}} {
		if f.on {
			s += " " + f.name
		}
	}
	for _, f := range []struct{ name, v string }{{"pinned", r.pinned}, {"stick", r.stick}, {"avoid", r.avoid}} {
		if f.v != "" {
			s += " " + f.name + "=" + f.v
		}
	}
	return s
}

// runSnapshot is everything an ignored event must leave as it was.
type runSnapshot struct {
	task                                        task.Task
	seq                                         int64
	attempt, gen, reasks, unwritten             int
	accepted, finished, queued, deadline, fresh bool
	sentAt                                      time.Time
	nonce, stick, avoid, pinned, cancelWhy      string
	held                                        int64
}

func snapshotRun(r *run) runSnapshot {
	return runSnapshot{task: *r.t.Clone(), seq: r.seq, attempt: r.attempt, gen: r.gen, reasks: r.reasks,
		unwritten: len(r.unwritten), accepted: r.accepted, finished: r.finished, queued: r.queued,
		deadline: r.deadlineArmed, fresh: r.fresh, sentAt: r.sentAt, nonce: r.nonce, stick: r.stick,
		avoid: r.avoid, pinned: r.pinned, cancelWhy: r.cancelWhy, held: r.out.Contiguous()}
}

// ---- Checks ----

type rowCheck func(t *testing.T, r *run, effs []effect)

func allOf(cs ...rowCheck) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		for _, c := range cs {
			c(t, r, effs)
		}
	}
}

// effectOf is the first effect of type T.
func effectOf[T effect](t *testing.T, effs []effect) T {
	t.Helper()
	for _, e := range effs {
		if x, ok := e.(T); ok {
			return x
		}
	}
	var zero T
	t.Fatalf("no %T among %q", zero, describe(effs))
	return zero
}

// lastWrite is the last write effect.
func lastWrite(t *testing.T, effs []effect) write {
	t.Helper()
	for i := len(effs) - 1; i >= 0; i-- {
		if w, ok := effs[i].(write); ok {
			return w
		}
	}
	t.Fatalf("no write among %q", describe(effs))
	return write{}
}

// written is every event written, in order.
func writtenEvents(effs []effect) []*task.Event {
	var evs []*task.Event
	for _, e := range effs {
		if w, ok := e.(write); ok {
			evs = append(evs, w.events...)
		}
	}
	return evs
}

// wantEvent checks the last event written.
func wantEvent(typ, msg string) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		w := lastWrite(t, effs)
		ev := w.events[len(w.events)-1]
		if ev.Type != typ || ev.Message != msg {
			t.Errorf("event written: %s %q, want %s %q", ev.Type, ev.Message, typ, msg)
		}
		if ev.State != r.t.State || ev.Seq != r.seq || !ev.At.Equal(mtNow) {
			t.Errorf("event stamped seq %d, %s at %v; want seq %d, %s at %v", ev.Seq, ev.State, ev.At, r.seq, r.t.State, mtNow)
		}
	}
}

// wantMessages checks the messages of every event written.
func wantMessages(msgs ...string) rowCheck {
	return func(t *testing.T, _ *run, effs []effect) {
		t.Helper()
		var got []string
		for _, ev := range writtenEvents(effs) {
			got = append(got, ev.Message)
		}
		if !slices.Equal(got, msgs) {
			t.Errorf("events written:\n got  %q\n want %q", got, msgs)
		}
	}
}

// wantError checks the task's error (0: none) and that of the last event.
func wantError(code int, msg string) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		switch e := r.t.Error; {
		case code == 0 && e != nil:
			t.Errorf("task error %+v, want none", e)
		case code != 0 && (e == nil || e.Code != code || e.Message != msg):
			t.Errorf("task error %+v, want %d %q", e, code, msg)
		}
		if code == 0 {
			return
		}
		w := lastWrite(t, effs)
		if ev := w.events[len(w.events)-1]; ev.Type != task.EventError || ev.Error == nil || ev.Error.Code != code {
			t.Errorf("final event %s with error %+v, want an error event with %d", ev.Type, ev.Error, code)
		}
	}
}

// wantRetries checks the retries: their codes, agents and waits.
func wantRetries(want ...task.Retry) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		var got []task.Retry
		for _, rt := range r.t.Retries {
			got = append(got, task.Retry{Attempt: rt.Attempt, Code: rt.Code, AgentID: rt.AgentID, WaitMS: rt.WaitMS})
		}
		if !slices.Equal(got, want) {
			t.Errorf("retries:\n got  %+v\n want %+v", got, want)
		}
	}
}

func retryOf(attempt, code int, agentID string, waitMS int64) task.Retry {
	return task.Retry{Attempt: attempt, Code: code, AgentID: agentID, WaitMS: waitMS}
}

// wantRetryEvent checks the retry event and the retry timer it arms.
func wantRetryEvent(n int, wait string, code int, fire retryDue) rowCheck {
	return allOf(wantEvent(task.EventRetry, fmt.Sprintf("retry %d in %s", n, wait)),
		func(t *testing.T, r *run, effs []effect) {
			t.Helper()
			w := lastWrite(t, effs)
			if ev := w.events[len(w.events)-1]; ev.Error == nil || ev.Error.Code != code {
				t.Errorf("retry event error %+v, want %d", ev.Error, code)
			}
			if a := effectOf[arm](t, effs); a.fire != fire {
				t.Errorf("retry timer fires %#v, want %#v", a.fire, fire)
			}
		})
}

// wantFinal checks that the final write hands back finalStored with its event,
// whether it committed or failed: the end shows either way.
func wantFinal(t *testing.T, r *run, effs []effect) {
	t.Helper()
	w := lastWrite(t, effs)
	if !w.record || w.then == nil {
		t.Fatalf("final write: record %v, then %v", w.record, w.then != nil)
	}
	ev := w.events[len(w.events)-1]
	first := w.events[0].Message == "submitted" // a failure leaves it never stored
	for _, err := range []error{nil, errBoom} {
		if got, ok := w.then(err).(finalStored); !ok || got.ev != ev || got.uncount != (first && err != nil) {
			t.Errorf("then(%v) = %#v, want finalStored of the final event (uncount only when a first write failed)", err, w.then(err))
		}
	}
	if r.t.FinishedAt == nil || !r.t.FinishedAt.Equal(mtNow) {
		t.Errorf("finished at %v, want %v", r.t.FinishedAt, mtNow)
	}
}

// wantStored checks that the dispatch's write hands back stored for its attempt.
func wantStored(attempt int, agentID, version string, first bool) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		w := lastWrite(t, effs)
		if w.then == nil {
			t.Fatal("the dispatch's write has no then")
		}
		want := stored{attempt: attempt, agentID: agentID, version: version, first: first}
		if got := w.then(nil); got != want {
			t.Errorf("then(nil) = %#v, want %#v", got, want)
		}
		want.err = errBoom
		if got := w.then(errBoom); got != want {
			t.Errorf("then(err) = %#v, want %#v", got, want)
		}
		if r.nonce != "n"+strconv.Itoa(attempt) {
			t.Errorf("nonce %q, want a fresh one per attempt", r.nonce)
		}
	}
}

// wantSilence checks the silence timer armed and the event it fires.
func wantSilence(why string) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		if a := effectOf[arm](t, effs); a.kind != timerSilence || a.fire != (silence{gen: r.gen, why: why}) {
			t.Errorf("armed %s firing %#v, want silence{gen: %d, why: %q}", timerName(a.kind), a.fire, r.gen, why)
		}
	}
}

func wantCancelAgent(reason string, answered bool) rowCheck {
	return func(t *testing.T, _ *run, effs []effect) {
		t.Helper()
		if c := effectOf[cancelAgent](t, effs); c.reason != reason || (c.answered != nil) != answered {
			t.Errorf("cancelAgent reason %q answered %v, want %q %v", c.reason, c.answered != nil, reason, answered)
		}
	}
}

func wantTask(what string, ok func(*task.Task) bool) rowCheck {
	return func(t *testing.T, r *run, _ []effect) {
		t.Helper()
		if !ok(r.t) {
			t.Errorf("task: want %s; got %+v", what, *r.t)
		}
	}
}

// ---- Tables ----

type machineRow struct {
	name  string
	from  string // a key of machineStates
	ev    event
	state task.State
	flags string // runFlags
	effs  []string
	check rowCheck
	// ignored: the event must change nothing and emit nothing.
	ignored bool
}

// ignore is a row for an event that must leave the run as it was.
func ignoreRow(name, from string, ev event) machineRow {
	return machineRow{name: name, from: from, ev: ev, ignored: true}
}

func runRows(t *testing.T, rows []machineRow) {
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			m := newTestMachine()
			build, ok := machineStates[row.from]
			if !ok {
				t.Fatalf("no starting state %q", row.from)
			}
			r := build(t, m)
			before := snapshotRun(r)
			effs := m.apply(r, row.ev)
			got := describe(effs)
			if row.ignored {
				if len(effs) != 0 {
					t.Errorf("%s in %s: effects %q, want none", reflect.TypeOf(row.ev).Name(), row.from, got)
				}
				if after := snapshotRun(r); !reflect.DeepEqual(before, after) {
					t.Errorf("%s in %s changed the run:\n before %+v\n after  %+v", reflect.TypeOf(row.ev).Name(), row.from, before, after)
				}
				return
			}
			if !slices.Equal(got, row.effs) {
				t.Errorf("effects:\n got  %q\n want %q", got, row.effs)
			}
			if r.t.State != row.state {
				t.Errorf("state %s, want %s", r.t.State, row.state)
			}
			if f := runFlags(r); f != row.flags {
				t.Errorf("flags %q, want %q", f, row.flags)
			}
			if row.check != nil {
				row.check(t, r, effs)
			}
		})
	}
}

func effCat(lists ...[]string) []string { return slices.Concat(lists...) }

func effList(s ...string) []string { return s }

// retryEffs: the attempt ends with code, is counted, and waits.
func retryEffs(code int, wait string) []string {
	c := strconv.Itoa(code)
	return effList("stop(silence)", "release(drain,"+c+")", "retried("+c+")", "write(record,1 event)", "notify(retry)", "arm(retry,"+wait+")")
}

// endEffs: the task ends; the end is written and shows once committed.
var endEffs = effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event)")

// endQueuedEffs: the task ends, out of its queue.
var endQueuedEffs = effList("stopAll", "unqueue", "stop(silence)", "release(drain)", "write(record,1 event)")

// failedEffs: an attempt failed with code, which ends the task.
func failedEffs(code int) []string {
	return effCat(effList("stop(silence)", "release(drain,"+strconv.Itoa(code)+")"), endEffs)
}

// dispatchEffs: a dispatch after the first, whose deadline already runs.
func dispatchEffs(agentID string) []string {
	return effList("claim("+agentID+")", "write(record,1 event)", "notify(state)")
}

var routeRows = []machineRow{
	{name: "submitted is routed", from: "new", ev: submitted{}, state: task.StatePending, flags: "attempt=0",
		effs: effList("route"),
		check: func(t *testing.T, r *run, _ []effect) {
			if !r.fresh || len(r.unwritten) != 1 || r.unwritten[0].Message != "submitted" || r.unwritten[0].Seq != 1 {
				t.Errorf("fresh %v, unwritten %+v: want the submitted event kept for the first write", r.fresh, r.unwritten)
			}
		}},
	{name: "routed to an agent is written then dispatched", from: "routing", ev: routed{agentID: "a1", version: "1.0"},
		state: task.StateDispatched, flags: "attempt=1",
		effs: effList("claim(a1)", "write(record,2 events)", "notify(state)", "arm(deadline,1m5s)"),
		check: allOf(wantMessages("submitted", "dispatched to a1 (attempt 1)"), wantEvent(task.EventState, "dispatched to a1 (attempt 1)"),
			wantStored(1, "a1", "1.0", true),
			func(t *testing.T, r *run, effs []effect) {
				if d := effs[3].(arm); d.fire != (deadlineDue{}) || !r.deadlineArmed {
					t.Errorf("deadline timer fires %#v (armed %v)", d.fire, r.deadlineArmed)
				}
				tk := r.t
				if tk.Attempts != 1 || tk.AgentID != "a1" || !tk.FirstDispatchAt.Equal(mtNow) || !tk.LastAttemptAt.Equal(mtNow) || r.fresh {
					t.Errorf("task %+v fresh %v", *tk, r.fresh)
				}
			})},
	{name: "routed to an agent that stops its work type's processes with a grace: the deadline waits it too", from: "routing",
		ev: routed{agentID: "a1", version: "1.0", stopGrace: 10 * time.Second}, state: task.StateDispatched, flags: "attempt=1",
		// 60 s + 5 s of deadline_grace + the agent's 10 s cancel_grace
		effs: effList("claim(a1)", "write(record,2 events)", "notify(state)", "arm(deadline,1m15s)")},
	{name: "held back by a limit, the queued task's history says why", from: "routing",
		ev:    routed{queue: true, why: "rate limit of agent a1 (5/s) until T"},
		state: task.StatePending, flags: "attempt=0 queued",
		effs:  effList("enqueue(tail)", "write(record,2 events)"),
		check: wantMessages("submitted", "queued: rate limit of agent a1 (5/s) until T")},
	{name: "routed to the queue writes the new task", from: "routing", ev: routed{queue: true},
		state: task.StatePending, flags: "attempt=0 queued",
		effs: effList("enqueue(tail)", "write(record,1 event)"),
		check: allOf(wantMessages("submitted"), func(t *testing.T, r *run, effs []effect) {
			if lastWrite(t, effs).then != nil || r.fresh {
				t.Error("a queued task's write hands nothing back, and it is no longer fresh")
			}
		})},
	{name: "routed fail-fast ends the task in error", from: "routing", ev: routed{err: errUnsupported, failFast: true},
		state: task.StateError, flags: "attempt=0 finished",
		effs:  effList("stopAll", "stop(silence)", "release(drain)", "write(record,2 events)"),
		check: allOf(wantError(5006, errUnsupported.Message), wantFinal, wantRetries())},
	{name: "routed retryable error waits for a retry", from: "routing", ev: routed{err: errUnavailable},
		state: task.StatePending, flags: "attempt=0",
		effs:  effList("stop(silence)", "release(drain,5002)", "retried(5002)", "write(record,2 events)", "notify(retry)", "arm(retry,1s)"),
		check: allOf(wantRetryEvent(1, "1s", 5002, retryDue{0}), wantRetries(retryOf(0, 5002, "", 1000)), wantError(0, ""))},
	{name: "queued task drained to an agent", from: "queued", ev: routed{agentID: "a1"},
		state: task.StateDispatched, flags: "attempt=1",
		effs:  effList("unqueue", "claim(a1)", "write(record,1 event)", "notify(state)", "arm(deadline,1m5s)"),
		check: wantStored(1, "a1", "", false)},
	{name: "retry wait routed to another agent", from: "retry-wait", ev: routed{agentID: "a2", version: "1.0"},
		state: task.StateDispatched, flags: "attempt=2 avoid=a1",
		effs:  dispatchEffs("a2"), // the deadline runs from the first dispatch
		check: allOf(wantEvent(task.EventState, "dispatched to a2 (attempt 2)"), wantStored(2, "a2", "1.0", false))},
	{name: "retry wait routed to the queue goes to its head", from: "retry-wait", ev: routed{queue: true},
		state: task.StatePending, flags: "attempt=1 queued avoid=a1", effs: effList("enqueue(head)")},
	{name: "retry wait routed to a retryable error waits longer", from: "retry-wait", ev: routed{err: errUnavailable},
		state: task.StatePending, flags: "attempt=1 avoid=a1", effs: retryEffs(5002, "2s"),
		check: allOf(wantRetryEvent(2, "2s", 5002, retryDue{1}), wantRetries(retryOf(1, 5002, "a1", 1000), retryOf(1, 5002, "a1", 2000)))},
	{name: "retry wait routed fail-fast ends in error", from: "retry-wait", ev: routed{err: errUnavailable, failFast: true},
		state: task.StateError, flags: "attempt=1 finished avoid=a1", effs: endEffs,
		check: allOf(wantError(5002, errUnavailable.Message), wantFinal)},
	{name: "pinned retry routed to its agent", from: "retry-wait-pinned", ev: routed{agentID: "a1", version: "1.0"},
		state: task.StateDispatched, flags: "attempt=2 pinned=a1 stick=a1", effs: dispatchEffs("a1"),
		check: allOf(wantEvent(task.EventState, "dispatched to a1 (attempt 2)"), wantStored(2, "a1", "1.0", false))},
	{name: "requeued task routed to another agent", from: "requeued", ev: routed{agentID: "a2"},
		state: task.StateDispatched, flags: "attempt=2 avoid=a1", effs: effCat(effList("unqueue"), dispatchEffs("a2"))},
	{name: "resumed queued task routed", from: "resumed-queued", ev: routed{agentID: "a1"},
		state: task.StateDispatched, flags: "attempt=1",
		effs:  effList("unqueue", "claim(a1)", "write(record,1 event)", "notify(state)", "arm(deadline,1m5s)"),
		check: wantEvent(task.EventState, "dispatched to a1 (attempt 1)")},
	{name: "resumed task routed to its agent keeps its deadline", from: "resumed-pinned", ev: routed{agentID: "a1", version: "1.0"},
		state: task.StateDispatched, flags: "attempt=1 pinned=a1 stick=a1",
		// first dispatched 10 s ago: 60 s + 5 s grace from then
		effs:  effList("claim(a1)", "write(record,1 event)", "notify(state)", "arm(deadline,55s)"),
		check: allOf(wantEvent(task.EventState, "dispatched to a1 (attempt 2)"), wantStored(1, "a1", "1.0", false))},
	{name: "resumed task whose agent is gone stays pinned", from: "resumed-pinned", ev: routed{err: errUnavailable},
		state: task.StatePending, flags: "attempt=0 pinned=a1 stick=a1", effs: retryEffs(5002, "1s"),
		check: wantRetries(retryOf(1, 5002, "a1", 1000))},
	{name: "first write failed drops a queued task", from: "queued", ev: dropped{},
		state: task.StatePending, flags: "attempt=0 finished",
		effs: effList("unqueue", "stopAll", "stop(silence)", "release(drain)", "forget(uncount)")},
	{name: "first write failed drops a dispatched task", from: "dispatched", ev: dropped{},
		state: task.StateDispatched, flags: "attempt=1 finished",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "forget(uncount)")},
}

// TestMachineRoutesATaskWhereRoutingSends: routing's four answers, in every state
// that asks for one.
func TestMachineRoutesATaskWhereRoutingSends(t *testing.T) { runRows(t, routeRows) }

var publishRows = []machineRow{
	{name: "stored dispatch is published, and the agent's time to answer starts", from: "dispatched",
		ev: stored{attempt: 1, agentID: "a1", first: true}, state: task.StateDispatched, flags: "attempt=1",
		effs: effList("publish(a1)", "arm(silence,2s)"), check: allOf(wantPublish("1", envelope.ProtocolVersion), wantSilence(ackTimeout))},
	{name: "stored dispatch is published in the agent's version", from: "dispatched", ev: stored{attempt: 1, agentID: "a1", version: "1.1"},
		state: task.StateDispatched, flags: "attempt=1", effs: effList("publish(a1)", "arm(silence,2s)"), check: wantPublish("1", "1.1")},
	ignoreRow("first write failed is Submit's to answer", "dispatched", stored{attempt: 1, agentID: "a1", first: true, err: errBoom}),
	{name: "later dispatch write failed is retried anywhere", from: "dispatched", ev: stored{attempt: 1, agentID: "a1", err: errBoom},
		state: task.StatePending, flags: "attempt=1 avoid=a1", effs: retryEffs(5002, "1s"),
		check: allOf(wantRetryEvent(1, "1s", 5002, retryDue{1}), wantRetries(retryOf(1, 5002, "a1", 1000)),
			wantTask("retry message naming the store", func(tk *task.Task) bool { return tk.Retries[0].Message == "store dispatched task: boom" }))},
	ignoreRow("stored of an earlier attempt", "pinned-dispatched", stored{attempt: 1, agentID: "a1", first: true}),
	ignoreRow("failed write of an earlier attempt", "pinned-dispatched", stored{attempt: 1, agentID: "a1", err: errBoom}),
	{name: "publish failed is retried anywhere", from: "dispatched-stored", ev: sendFailed{attempt: 1, err: errBoom},
		state: task.StatePending, flags: "attempt=1 avoid=a1", effs: retryEffs(5002, "1s"),
		check: allOf(wantRetryEvent(1, "1s", 5002, retryDue{1}),
			wantTask("retry message naming the publish", func(tk *task.Task) bool { return tk.Retries[0].Message == "publish work_request: boom" }))},
	{name: "publish failed on a pinned task stays pinned", from: "pinned-dispatched", ev: sendFailed{attempt: 2, err: errBoom},
		state: task.StatePending, flags: "attempt=2 pinned=a1 stick=a1", effs: retryEffs(5002, "2s"),
		check: wantRetries(retryOf(1, 5001, "a1", 1000), retryOf(2, 5002, "a1", 2000))},
	ignoreRow("publish failed of an earlier attempt", "pinned-dispatched", sendFailed{attempt: 1, err: errBoom}),
}

// wantPublish checks the work_request of the publish effect.
func wantPublish(attempt, version string) rowCheck {
	return func(t *testing.T, r *run, effs []effect) {
		t.Helper()
		p := effectOf[publish](t, effs)
		env := p.env
		wr, ok := env.Payload.(*envelope.WorkRequest)
		if !ok {
			t.Fatalf("payload %T, want a work_request", env.Payload)
		}
		if strconv.Itoa(p.attempt) != attempt || env.Type != envelope.TypeWorkRequest || env.ProtocolVersion != version ||
			env.RequestID != mtReqID || env.TraceID != mtTraceID || env.FromAgent != envelope.Orchestrator || env.ToAgent != envelope.Infra {
			t.Errorf("publish attempt %d, envelope %+v; want attempt %s, version %s, request %s", p.attempt, *env, attempt, version, mtReqID)
		}
		if wr.TaskID != mtTaskID || wr.WorkType != "shell" || wr.Parameters["cmd"] != "true" || wr.Hints == nil || wr.Hints.MaxDurationSeconds != 60 {
			t.Errorf("work_request %+v", *wr)
		}
	}
}

// TestMachinePublishesADispatchOnlyOnceItIsStored: the work_request goes out after
// the write naming its agent commits, and only for the current attempt.
func TestMachinePublishesADispatchOnlyOnceItIsStored(t *testing.T) { runRows(t, publishRows) }

// TestMachinePublishesInTheVersionRoutingChose: the agent's version goes from the
// routed event through the dispatch's write to the work_request.
func TestMachinePublishesInTheVersionRoutingChose(t *testing.T) {
	for version, want := range map[string]string{"": envelope.ProtocolVersion, "1.1": "1.1"} {
		t.Run(want, func(t *testing.T) {
			m := newTestMachine()
			r := stRouting(t, m)
			effs := mustApply(t, m, r, routed{agentID: "a1", version: version}, task.StateDispatched)
			effs = mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
			wantPublish("1", want)(t, r, effs)
		})
	}
}

var messageRows = []machineRow{
	{name: "first status acknowledges the attempt", from: "dispatched-stored", ev: statusMsg("a1", ""),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("acknowledged", "arm(silence,3s)", "write(1 event)", "notify(status)"),
		check: allOf(wantSilence(idleTimeout), wantEvent(task.EventStatus, ""), func(t *testing.T, r *run, effs []effect) {
			if w := lastWrite(t, effs); w.then != nil {
				t.Error("a status write hands nothing back")
			}
			if tk := r.t; tk.ProgressPercent != 10 || len(tk.Steps) != 1 || tk.Steps[0].Name != "build" || tk.Steps[0].Status != envelope.StatusRunning {
				t.Errorf("progress %d, steps %+v", tk.ProgressPercent, tk.Steps)
			}
		})},
	{name: "status with output writes its piece", from: "dispatched-stored", ev: statusMsg("a1", "hello"),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("acknowledged", "arm(silence,3s)", "write(1 event,piece)", "notify(status)"),
		check: func(t *testing.T, r *run, effs []effect) {
			w := lastWrite(t, effs)
			if w.piece != (task.Piece{Offset: 0, Data: "hello"}) || *w.events[0].OutputOffset != 0 || r.t.OutputBytes != 5 {
				t.Errorf("piece %+v, output bytes %d", w.piece, r.t.OutputBytes)
			}
		}},
	{name: "next status restarts the inactivity timer", from: "running", ev: statusMsg("a1", ""),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("arm(silence,3s)", "write(1 event)", "notify(status)"), check: wantSilence(idleTimeout)},
	{name: "status with an orphan chunk has it rejected", from: "running",
		ev: func() event {
			msg := statusMsg("a1", "56789")
			msg.env.Payload.(*envelope.WorkStatus).Step.OutputChunk = "bytes 5-10 of 10"
			return msg
		}(),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "rejected", "write(1 event)", "notify(status)"),
		check: wantStatusOutput(nil, "")},
	{name: "status in a cancel keeps the task running", from: "cancel-requested", ev: statusMsg("a1", ""),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("arm(silence,3s)", "write(1 event)", "notify(status)")},
	{name: "success result ends the task with its output", from: "running", ev: resultMsg(envelope.ResultSuccess, "done"),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event,replace)"),
		check: allOf(wantFinal, wantError(0, ""), func(t *testing.T, r *run, effs []effect) {
			w, tk := lastWrite(t, effs), r.t
			if *w.replace != "done" || w.events[0].Type != task.EventResult || w.events[0].Result == nil {
				t.Errorf("replace %q, event %+v", *w.replace, *w.events[0])
			}
			if tk.ProgressPercent != 100 || tk.OutputBytes != 4 || !tk.OutputComplete || tk.Result.Status != envelope.ResultSuccess ||
				tk.Steps[0].Status != envelope.StatusStepCompleted {
				t.Errorf("task %+v, result %+v", *tk, *tk.Result)
			}
		})},
	{name: "success result without output replaces nothing", from: "running", ev: resultMsg(envelope.ResultSuccess, ""),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted", effs: endEffs},
	{name: "result before any status ends the task", from: "dispatched-stored", ev: resultMsg(envelope.ResultSuccess, "done"),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event,replace)"), check: wantFinal},
	{name: "failed result ends the task failed", from: "running", ev: resultMsg(envelope.ResultFailed, "oops"),
		state: task.StateFailed, flags: "attempt=1 finished accepted",
		effs:  effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event,replace)"),
		check: allOf(wantFinal, wantTask("its open step failed", func(tk *task.Task) bool { return tk.Steps[0].Status == "failed" }))},
	{name: "cancelled result ends the task cancelled", from: "running", ev: resultMsg(envelope.ResultCancelled, ""),
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: endEffs, check: wantFinal},
	{name: "truncated result with a gap asks its agent again, pinned to it", from: "running", ev: truncatedMsg(envelope.ResultSuccess, "xyz", 100),
		state: task.StateRunning, flags: "attempt=1 accepted pinned=a1 stick=a1",
		effs: effList("stop(silence)", "release(drain)", "write(record,1 event)", "notify(state)", "route"),
		check: allOf(wantEvent(task.EventState, "output incomplete (0 of 100 bytes): asking again"),
			func(t *testing.T, r *run, _ []effect) {
				if r.reasks != 1 || r.t.Result != nil {
					t.Errorf("reasks %d, result %+v", r.reasks, r.t.Result)
				}
			})},
	{name: "truncated result with the output streamed whole ends the task", from: "streamed", ev: truncatedMsg(envelope.ResultSuccess, "789", 10),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted", effs: endEffs,
		check: allOf(wantFinal, wantTask("output complete, result truncated", func(tk *task.Task) bool {
			return tk.OutputComplete && tk.OutputBytes == 10 && tk.Result.OutputTruncated && tk.Result.OutputTotalBytes == 10
		}))},
	{name: "truncated result with a gap in a cancel ends the task", from: "cancel-requested", ev: truncatedMsg(envelope.ResultCancelled, "xyz", 100),
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: endEffs,
		check: wantTask("output incomplete", func(tk *task.Task) bool { return !tk.OutputComplete })},
	{name: "retryable error before a status retries anywhere", from: "dispatched-stored", ev: errorMsg(errcodes.NewResourceLimitExceeded("memory", 1, 2)),
		state: task.StatePending, flags: "attempt=1 avoid=a1", effs: retryEffs(5005, "1s"),
		check: wantRetries(retryOf(1, 5005, "a1", 1000))},
	{name: "retryable error after a status retries on the same agent", from: "running", ev: errorMsg(errUnavailable),
		state: task.StatePending, flags: "attempt=1 accepted pinned=a1 stick=a1", effs: retryEffs(5002, "1s")},
	{name: "non-retryable error ends the task", from: "running", ev: errorMsg(errInvalid),
		state: task.StateError, flags: "attempt=1 finished accepted", effs: failedEffs(5003),
		check: allOf(wantError(5003, errInvalid.Message), wantFinal, wantRetries())},
	{name: "unsupported version ends the task", from: "dispatched-stored", ev: errorMsg(errcodes.NewUnsupportedVersion("1.1", []string{"1.0"})),
		state: task.StateError, flags: "attempt=1 finished", effs: failedEffs(5006)},
	{name: "retryable error in a cancel ends it cancelled", from: "cancel-requested", ev: errorMsg(errUnavailable),
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: failedEffs(5002),
		check: allOf(wantEvent(task.EventState, "cancelled"), wantRetries())},
	// A status that comes after its attempt timed out is taken: the task runs again,
	// while its retry timer still runs.
	{name: "late status in a pinned retry wait is applied", from: "retry-wait-pinned", ev: statusMsg("a1", ""),
		state: task.StateRunning, flags: "attempt=1 accepted pinned=a1 stick=a1",
		effs: effList("acknowledged", "arm(silence,3s)", "write(1 event)", "notify(status)")},
	ignoreRow("status from another agent", "running", statusMsg("a2", "")),
	ignoreRow("result from another agent", "running", agentMsg("a2", mtReqID, &envelope.WorkResult{TaskID: mtTaskID, Status: envelope.ResultSuccess})),
	ignoreRow("error from another agent", "dispatched-stored", agentMsg("a2", mtReqID, envelope.NewErrorPayload(errInvalid))),
	ignoreRow("status for another request", "running", agentMsg("a1", "req-2", &envelope.WorkStatus{TaskID: mtTaskID, Status: envelope.StatusRunning})),
	ignoreRow("status for another task", "running", agentMsg("a1", mtReqID, &envelope.WorkStatus{TaskID: "t2", Status: envelope.StatusRunning})),
	ignoreRow("result for another task", "running", agentMsg("a1", mtReqID, &envelope.WorkResult{TaskID: "t2", Status: envelope.ResultSuccess})),
	ignoreRow("unexpected payload", "running", agentMsg("a1", mtReqID, &envelope.ControlAck{Command: envelope.TypeCancel, OK: true})),
	ignoreRow("message to a queued task", "queued", statusMsg("a1", "")),
}

// TestMachineAppliesOnlyItsAgentsMessages: statuses, results and errors from the
// task's agent for its request; everything else is dropped.
func TestMachineAppliesOnlyItsAgentsMessages(t *testing.T) { runRows(t, messageRows) }

var noResponderRows = []machineRow{
	{name: "no responders requeues without spending a retry", from: "dispatched-stored", ev: noResponders{agentID: "a1", nonce: "n1"},
		state: task.StatePending, flags: "attempt=1 queued avoid=a1",
		effs: effList("unreachable(a1)", "settle(never-reached)", "stop(silence)", "release(drain,never-reached)",
			"write(record,1 event)", "notify(state)", "enqueue(head)", "drain"),
		check: allOf(wantEvent(task.EventState, "a1 did not receive it (no responders): queued again"), wantRetries(),
			func(t *testing.T, r *run, effs []effect) {
				if ev := lastWrite(t, effs).events[0]; ev.Error == nil || ev.Error.Code != 5002 {
					t.Errorf("event error %+v, want 5002", ev.Error)
				}
			})},
	{name: "no responders on a pinned task spends a retry", from: "pinned-dispatched", ev: noResponders{agentID: "a1", nonce: "n2"},
		state: task.StatePending, flags: "attempt=2 pinned=a1 stick=a1",
		effs:  effCat(effList("unreachable(a1)", "settle(never-reached)"), retryEffs(5002, "2s")),
		check: allOf(wantRetryEvent(2, "2s", 5002, retryDue{2}), wantRetries(retryOf(1, 5001, "a1", 1000), retryOf(2, 5002, "a1", 2000)))},
	{name: "no responders in a cancel ends it cancelled", from: "cancel-dispatched", ev: noResponders{agentID: "a1", nonce: "n1"},
		state: task.StateCancelled, flags: "attempt=1 finished",
		effs:  effCat(effList("unreachable(a1)", "settle(never-reached)", "stop(silence)", "release(drain,never-reached)"), endEffs),
		check: allOf(wantEvent(task.EventState, "cancelled"), wantFinal)},
	{name: "no responders with a wrong nonce is forged", from: "dispatched-stored", ev: noResponders{agentID: "a1", nonce: "n9"},
		state: task.StateDispatched, flags: "attempt=1", effs: effList("forged")},
	{name: "no responders of an earlier attempt is forged", from: "pinned-dispatched", ev: noResponders{agentID: "a1", nonce: "n1"},
		state: task.StateDispatched, flags: "attempt=2 pinned=a1 stick=a1", effs: effList("forged")},
	{name: "no responders naming another agent is forged", from: "dispatched-stored", ev: noResponders{agentID: "a2", nonce: "n1"},
		state: task.StateDispatched, flags: "attempt=1", effs: effList("forged")},
	ignoreRow("no responders after a status", "running", noResponders{agentID: "a1", nonce: "n1"}),
	ignoreRow("no responders in a retry wait", "retry-wait", noResponders{agentID: "a1", nonce: "n1"}),
	ignoreRow("no responders when queued again", "requeued", noResponders{agentID: "a1", nonce: "n1"}),
}

// TestMachineCountsNoRespondersOnlyOnItsAttemptsSubject: a "no responders" requeues
// an unpinned task at no cost, retries a pinned one, and counts only on the
// current attempt's nonce.
func TestMachineCountsNoRespondersOnlyOnItsAttemptsSubject(t *testing.T) { runRows(t, noResponderRows) }

var timerRows = []machineRow{
	{name: "ack timeout retries on the same agent", from: "dispatched-stored", ev: silence{gen: 1, why: ackTimeout},
		state: task.StatePending, flags: "attempt=1 pinned=a1 stick=a1", effs: retryEffs(5001, "1s"),
		check: allOf(wantRetryEvent(1, "1s", 5001, retryDue{1}), wantRetries(retryOf(1, 5001, "a1", 1000)), wantError(0, ""))},
	// The agent's time to answer starts with the send, after the store's commit.
	ignoreRow("no ack timeout before the dispatch is stored", "dispatched", silence{gen: 1, why: ackTimeout}),
	{name: "inactivity timeout retries on the same agent", from: "running", ev: silence{gen: 2, why: idleTimeout},
		state: task.StatePending, flags: "attempt=1 accepted pinned=a1 stick=a1", effs: retryEffs(5001, "1s"),
		check: wantTask("the retry says why", func(tk *task.Task) bool { return tk.Retries[0].Message == idleTimeout })},
	{name: "timeout of a pinned retry waits longer", from: "pinned-dispatched", ev: silence{gen: 3, why: ackTimeout},
		state: task.StatePending, flags: "attempt=2 pinned=a1 stick=a1", effs: retryEffs(5001, "2s"),
		check: wantRetryEvent(2, "2s", 5001, retryDue{2})},
	{name: "timeout in a cancel ends it cancelled", from: "cancel-requested", ev: silence{gen: 2, why: idleTimeout},
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: failedEffs(5001),
		check: allOf(wantEvent(task.EventState, "cancelled"), wantRetries(), wantFinal)},
	ignoreRow("ack timer after the first status", "running", silence{gen: 1, why: ackTimeout}),
	ignoreRow("silence timer of an ended attempt", "retry-wait-pinned", silence{gen: 1, why: ackTimeout}),
	ignoreRow("silence timer before any", "dispatched-stored", silence{gen: 0}),
	ignoreRow("silence timer of the previous attempt", "pinned-dispatched", silence{gen: 1, why: ackTimeout}),
	{name: "deadline of a dispatched task stops its agent", from: "dispatched-stored", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished", effs: effCat(effList("cancelAgent(a1)"), endEffs),
		check: allOf(wantError(5001, "task exceeded max_duration_seconds=60"), wantCancelAgent("max_duration_seconds exceeded", false), wantFinal)},
	{name: "deadline of a running task stops its agent", from: "running", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished accepted", effs: effCat(effList("cancelAgent(a1)"), endEffs)},
	{name: "deadline in a cancel ends it in error", from: "cancel-requested", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished accepted", effs: effCat(effList("cancelAgent(a1)"), endEffs)},
	{name: "deadline in a retry wait stops the pinned agent", from: "retry-wait-pinned", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished pinned=a1 stick=a1", effs: effCat(effList("cancelAgent(a1)"), endEffs),
		check: allOf(wantError(5001, "task exceeded max_duration_seconds=60"), wantCancelAgent("max_duration_seconds exceeded", false))},
	{name: "deadline in an unpinned retry wait tells no agent", from: "retry-wait", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished avoid=a1", effs: endEffs,
		check: wantError(5001, "task exceeded max_duration_seconds=60")},
	{name: "deadline of a requeued task takes it out of the queue", from: "requeued", ev: deadlineDue{},
		state: task.StateError, flags: "attempt=1 finished avoid=a1", effs: endQueuedEffs},
	{name: "retry due routes the task", from: "retry-wait", ev: retryDue{attempt: 1},
		state: task.StatePending, flags: "attempt=1 avoid=a1", effs: effList("route")},
	{name: "retry due of a pinned task routes it", from: "retry-wait-pinned", ev: retryDue{attempt: 1},
		state: task.StatePending, flags: "attempt=1 pinned=a1 stick=a1", effs: effList("route")},
	ignoreRow("retry due of an earlier attempt", "pinned-dispatched", retryDue{attempt: 1}),
	ignoreRow("retry due of a routing error before the dispatch", "dispatched-stored", retryDue{attempt: 0}),
	{name: "queue wait due routes a queued task unless its agents are online", from: "resumed-queued", ev: queueWaitDue{},
		state: task.StatePending, flags: "attempt=0 queued", effs: effList("route(unlessOnline)")},
	{name: "queue wait due of a queued task", from: "queued", ev: queueWaitDue{},
		state: task.StatePending, flags: "attempt=0 queued", effs: effList("route(unlessOnline)")},
	ignoreRow("queue wait due after the drain dispatched it", "dispatched-stored", queueWaitDue{}),
	ignoreRow("queue wait due in a retry wait", "retry-wait", queueWaitDue{}),
}

// TestMachineTimersActOnlyForTheirOwnAttempt: silence, deadline, retry and queue
// timers, current and stale.
func TestMachineTimersActOnlyForTheirOwnAttempt(t *testing.T) { runRows(t, timerRows) }

var cancelRows = []machineRow{
	{name: "cancel of a queued task ends it at once", from: "queued", ev: cancelRequested{reason: "op"},
		state: task.StateCancelled, flags: "attempt=0 finished", effs: endQueuedEffs,
		check: allOf(wantEvent(task.EventState, "cancelled before dispatch: op"), wantFinal,
			wantTask("cancel requested", func(tk *task.Task) bool { return tk.CancelRequested }))},
	{name: "cancel of a requeued task ends it at once", from: "requeued", ev: cancelRequested{},
		state: task.StateCancelled, flags: "attempt=1 finished avoid=a1", effs: endQueuedEffs},
	{name: "cancel in a retry wait ends it at once", from: "retry-wait", ev: cancelRequested{answered: make(chan struct{})},
		state: task.StateCancelled, flags: "attempt=1 finished avoid=a1", effs: endEffs,
		check: allOf(wantEvent(task.EventState, "cancelled before dispatch"), wantRetries(retryOf(1, 5002, "a1", 1000)))},
	{name: "cancel in a pinned retry wait tells its agent", from: "retry-wait-pinned", ev: cancelRequested{reason: "op", answered: make(chan struct{})},
		state: task.StateCancelled, flags: "attempt=1 finished pinned=a1 stick=a1", effs: effCat(effList("cancelAgent(a1)"), endEffs),
		check: allOf(wantEvent(task.EventState, "cancelled between attempts: op"), wantCancelAgent("op", false), wantFinal)},
	{name: "cancel of a dispatched task asks its agent", from: "dispatched", ev: cancelRequested{answered: make(chan struct{})},
		state: task.StateDispatched, flags: "attempt=1", effs: effList("write(record,1 event)", "notify(state)", "cancelAgent(a1,answer)"),
		check: allOf(wantEvent(task.EventState, "cancel requested"), wantCancelAgent("cancelled by operator", true))},
	{name: "cancel of a running task asks its agent", from: "running", ev: cancelRequested{reason: "op", answered: make(chan struct{})},
		state: task.StateRunning, flags: "attempt=1 accepted", effs: effList("write(record,1 event)", "notify(state)", "cancelAgent(a1,answer)"),
		check: allOf(wantEvent(task.EventState, "cancel requested: op"), wantCancelAgent("op", true),
			func(t *testing.T, r *run, _ []effect) {
				if !r.t.CancelRequested || r.cancelWhy != "op" {
					t.Errorf("cancel requested %v, why %q", r.t.CancelRequested, r.cancelWhy)
				}
			})},
	{name: "cancel of a resumed task asks its agent", from: "resumed-pinned", ev: cancelRequested{answered: make(chan struct{})},
		state: task.StateDispatched, flags: "attempt=0 pinned=a1 stick=a1", effs: effList("write(record,1 event)", "notify(state)", "cancelAgent(a1,answer)")},
	ignoreRow("second cancel", "cancel-requested", cancelRequested{reason: "again"}),
	ignoreRow("agent will cancel: wait for its result", "cancel-requested", cancelAnswer{ack: &envelope.ControlAck{Command: envelope.TypeCancel, OK: true}}),
	{name: "agent is not running it", from: "cancel-requested", ev: cancelAnswer{ack: &envelope.ControlAck{Command: envelope.TypeCancel}},
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: endEffs,
		check: allOf(wantEvent(task.EventState, "cancelled: op; agent was not running it"), wantFinal)},
	{name: "agent says why not", from: "cancel-requested", ev: cancelAnswer{ack: &envelope.ControlAck{Command: envelope.TypeCancel, Message: "no such task"}},
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: endEffs,
		check: wantEvent(task.EventState, "cancelled: op; agent: no such task")},
	{name: "agent unreachable", from: "cancel-requested", ev: cancelAnswer{err: errBoom},
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: endEffs,
		check: wantEvent(task.EventState, "cancelled: op; agent unreachable: boom")},
	{name: "dispatched agent is not running it", from: "cancel-dispatched", ev: cancelAnswer{ack: &envelope.ControlAck{Command: envelope.TypeCancel}},
		state: task.StateCancelled, flags: "attempt=1 finished", effs: endEffs,
		check: wantEvent(task.EventState, "cancelled; agent was not running it")},
	{name: "cancelled result ends a cancel", from: "cancel-requested", ev: resultMsg(envelope.ResultCancelled, "stopped"),
		state: task.StateCancelled, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event,replace)"), check: wantFinal},
	{name: "success result that beat the cancel", from: "cancel-requested", ev: resultMsg(envelope.ResultSuccess, "done"),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,1 event,replace)")},
	{name: "agent lost in a cancel ends it cancelled", from: "cancel-requested", ev: agentLost{agentID: "a1", attempt: 1, why: "agent offline"},
		state: task.StateCancelled, flags: "attempt=1 finished accepted", effs: failedEffs(5001)},
}

// TestMachineCancelsATaskInEveryState: at once before dispatch and between
// attempts, through its agent while it runs.
func TestMachineCancelsATaskInEveryState(t *testing.T) { runRows(t, cancelRows) }

var agentRows = []machineRow{
	{name: "agent lost before a status retries on it", from: "dispatched-stored", ev: agentLost{agentID: "a1", attempt: 1, why: "agent offline"},
		state: task.StatePending, flags: "attempt=1 pinned=a1 stick=a1", effs: retryEffs(5001, "1s"),
		check: wantTask("the retry says why", func(tk *task.Task) bool { return tk.Retries[0].Message == "agent offline" })},
	{name: "agent lost while running retries on it", from: "running", ev: agentLost{agentID: "a1", attempt: 1, why: "agent offline"},
		state: task.StatePending, flags: "attempt=1 accepted pinned=a1 stick=a1", effs: retryEffs(5001, "1s")},
	ignoreRow("agent lost of an earlier attempt", "pinned-dispatched", agentLost{agentID: "a1", attempt: 1}),
	ignoreRow("another agent lost", "running", agentLost{agentID: "a2", attempt: 1}),
	ignoreRow("agent lost in a retry wait", "retry-wait-pinned", agentLost{agentID: "a1", attempt: 1}),
	ignoreRow("agent lost of a queued task", "requeued", agentLost{agentID: "a1", attempt: 1}),
	{name: "agent replaced gets the dispatch again", from: "dispatched-stored", ev: agentReplaced{agentID: "a1", version: "1.0", attempt: 1},
		state: task.StateDispatched, flags: "attempt=2 pinned=a1 stick=a1",
		effs: effList("stop(silence)", "release(never-reached)", "write(record,1 event)", "notify(state)",
			"claim(a1)", "write(record,1 event)", "notify(state)"),
		check: allOf(wantMessages("a1 restarted: sent again", "dispatched to a1 (attempt 2)"), wantStored(2, "a1", "1.0", false),
			wantRetries())},
	{name: "agent replaced while running gets the task again", from: "running", ev: agentReplaced{agentID: "a1", version: "1.1", attempt: 1},
		state: task.StateDispatched, flags: "attempt=2 pinned=a1 stick=a1",
		effs: effList("stop(silence)", "release(never-reached)", "write(record,1 event)", "notify(state)",
			"claim(a1)", "write(record,1 event)", "notify(state)"),
		check: wantStored(2, "a1", "1.1", false)},
	ignoreRow("agent replaced of an earlier attempt", "pinned-dispatched", agentReplaced{agentID: "a1", attempt: 1}),
	ignoreRow("another agent replaced", "running", agentReplaced{agentID: "a2", attempt: 1}),
	ignoreRow("agent replaced in a retry wait", "retry-wait-pinned", agentReplaced{agentID: "a1", attempt: 1}),
}

// TestMachineFollowsItsAgentOfflineAndRestarted: an agent gone fails its attempt;
// a new process of it gets the request again, at no retry's cost.
func TestMachineFollowsItsAgentOfflineAndRestarted(t *testing.T) { runRows(t, agentRows) }

var resumeRows = []machineRow{
	{name: "dispatched task resumes on its agent", from: "stored-dispatched", ev: resumed{},
		state: task.StateDispatched, flags: "attempt=0 pinned=a1 stick=a1",
		effs:  effList("write(record,1 event)", "notify(state)", "route"),
		check: wantEvent(task.EventState, "resumed after orchestrator restart")},
	{name: "running task resumes on its agent", from: "stored-running", ev: resumed{},
		state: task.StateRunning, flags: "attempt=0 pinned=a1 stick=a1", effs: effList("write(record,1 event)", "notify(state)", "route")},
	{name: "task timed out on its agent resumes pinned", from: "stored-timed-out", ev: resumed{},
		state: task.StatePending, flags: "attempt=0 pinned=a1 stick=a1", effs: effList("write(record,1 event)", "notify(state)", "route")},
	{name: "task its agent never received resumes on it unpinned", from: "stored-unreached", ev: resumed{},
		state: task.StatePending, flags: "attempt=0 stick=a1", effs: effList("write(record,1 event)", "notify(state)", "route")},
	{name: "never dispatched task waits in the queue", from: "stored-pending", ev: resumed{},
		state: task.StatePending, flags: "attempt=0 queued",
		effs: effList("write(record,1 event)", "notify(state)", "enqueue(tail)", "arm(queue,2s)"),
		check: func(t *testing.T, r *run, effs []effect) {
			if a := effs[3].(arm); a.fire != (queueWaitDue{}) {
				t.Errorf("queue timer fires %#v", a.fire)
			}
			if ev := lastWrite(t, effs).events[0]; ev.Seq != 2 {
				t.Errorf("resumed event numbered %d, want 2: after the stored ones", ev.Seq)
			}
		}},
	{name: "pending task with a cancel ends cancelled", from: "stored-pending-cxl", ev: resumed{},
		state: task.StateCancelled, flags: "attempt=0 finished", effs: endEffs,
		check: allOf(wantEvent(task.EventState, "cancelled"), wantFinal)},
	// As it is: the request is sent again, and the agent is not told to cancel.
	{name: "dispatched task with a cancel resumes on its agent", from: "stored-dispatched-cxl", ev: resumed{},
		state: task.StateDispatched, flags: "attempt=0 pinned=a1 stick=a1", effs: effList("write(record,1 event)", "notify(state)", "route")},
}

// TestMachineResumesATaskFromTheStore: on the agent that may have it, or in the
// queue until the agents register.
func TestMachineResumesATaskFromTheStore(t *testing.T) { runRows(t, resumeRows) }

var finishedRows = []machineRow{
	{name: "final write committed shows the end", from: "finished", ev: finalStored{ev: &task.Event{Type: task.EventResult}},
		state: task.StateSucceeded, flags: "attempt=1 finished accepted", effs: effList("notify(result)", "forget")},
	ignoreRow("final write of a live task", "running", finalStored{ev: &task.Event{Type: task.EventResult}}),
	ignoreRow("submitted", "finished", submitted{}),
	ignoreRow("resumed", "finished", resumed{}),
	ignoreRow("routed", "finished", routed{agentID: "a1"}),
	ignoreRow("stored", "finished", stored{attempt: 1, agentID: "a1"}),
	ignoreRow("send failed", "finished", sendFailed{attempt: 1, err: errBoom}),
	ignoreRow("late status", "finished", statusMsg("a1", "x")),
	ignoreRow("duplicate result", "finished", resultMsg(envelope.ResultFailed, "")),
	ignoreRow("late error", "finished", errorMsg(errInvalid)),
	ignoreRow("no responders", "finished", noResponders{agentID: "a1", nonce: "n1"}),
	ignoreRow("silence", "finished", silence{gen: 3}),
	ignoreRow("deadline", "finished", deadlineDue{}),
	ignoreRow("retry due", "finished", retryDue{attempt: 1}),
	ignoreRow("queue wait due", "finished", queueWaitDue{}),
	ignoreRow("cancel", "finished", cancelRequested{}),
	ignoreRow("cancel answer", "finished", cancelAnswer{err: errBoom}),
	ignoreRow("agent lost", "finished", agentLost{agentID: "a1", attempt: 1}),
	ignoreRow("agent replaced", "finished", agentReplaced{agentID: "a1", attempt: 1}),
	ignoreRow("dropped", "finished", dropped{}),
}

// TestMachineFinishedRunTakesOnlyItsFinalWrite: an ended task ignores everything
// but the commit of its final write.
func TestMachineFinishedRunTakesOnlyItsFinalWrite(t *testing.T) { runRows(t, finishedRows) }

var approvalRows = []machineRow{
	{name: "a task that needs approval waits, stored, sent nowhere", from: "new-approval", ev: submitted{by: "op"},
		state: task.StateAwaitingApproval, flags: "attempt=0",
		effs:  effList("write(record,2 events)", "notify(state)", "arm(approval,1h0m0s)", "asked"),
		check: wantEvent(task.EventState, "awaiting approval: work type shell requires approval")},
	{name: "approved, it is routed", from: "awaiting", ev: approvalDecided{approve: true, by: "op", note: "ok"},
		state: task.StatePending, flags: "attempt=0", effs: effList("stop(approval)", "route"),
		check: wantTask("approved by op", func(tk *task.Task) bool {
			a := tk.Approval
			return a.State == task.ApprovalApproved && a.By == "op" && a.Note == "ok" && a.DecidedAt != nil
		})},
	{name: "rejected, it ends", from: "awaiting", ev: approvalDecided{by: "op", note: "no"},
		state: task.StateRejected, flags: "attempt=0 finished", effs: effCat(effList("stop(approval)"), endEffs),
		check: allOf(wantEvent(task.EventState, "rejected: no"), wantFinal,
			wantTask("rejected by op", func(tk *task.Task) bool { return tk.Approval.State == task.ApprovalRejected }))},
	{name: "nobody answered: it ends rejected", from: "awaiting", ev: approvalExpired{},
		state: task.StateRejected, flags: "attempt=0 finished", effs: endEffs,
		check: wantTask("expired", func(tk *task.Task) bool { return tk.Approval.State == task.ApprovalExpired })},
	{name: "cancelled while it waits", from: "awaiting", ev: cancelRequested{by: "op"},
		state: task.StateCancelled, flags: "attempt=0 finished", effs: endEffs,
		check: wantEvent(task.EventState, "cancelled before dispatch")},
	{name: "resumed, it waits the rest of its time", from: "stored-awaiting", ev: resumed{},
		state: task.StateAwaitingApproval, flags: "attempt=0",
		effs: effList("write(record,1 event)", "notify(state)", "arm(approval,30m0s)")},
	ignoreRow("an approval of a task that does not wait", "running", approvalDecided{approve: true}),
	ignoreRow("a late expiry", "dispatched", approvalExpired{}),
}

// TestMachineHoldsWorkForApproval: a task that needs approval waits until
// approved, rejected, expired or cancelled, across a restart.
func TestMachineHoldsWorkForApproval(t *testing.T) { runRows(t, approvalRows) }

// cappedMsg is the history entry of an output cut at mtMaxOutput.
const cappedMsg = "output over max_output_bytes (16 bytes): the rest is dropped"

// wantStatusOutput checks the status event written: its offset (nil: none) and
// the output it carries, stored and streamed.
func wantStatusOutput(off *int64, out string) rowCheck {
	return func(t *testing.T, _ *run, effs []effect) {
		t.Helper()
		evs := writtenEvents(effs)
		ev := evs[len(evs)-1]
		if ev.Type != task.EventStatus || ev.Status.Step.Output != out || (ev.OutputOffset == nil) != (off == nil) ||
			off != nil && *ev.OutputOffset != *off {
			t.Errorf("status event %s carries %q at %v, want %q at %v", ev.Type, ev.Status.Step.Output, ev.OutputOffset, out, off)
		}
	}
}

// wantPieces checks the output pieces written, in order.
func wantPieces(want ...task.Piece) rowCheck {
	return func(t *testing.T, _ *run, effs []effect) {
		t.Helper()
		var got []task.Piece
		for _, e := range effs {
			if w, ok := e.(write); ok && w.piece != (task.Piece{}) {
				got = append(got, w.piece)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("pieces written %+v, want %+v", got, want)
		}
	}
}

// wantCapped checks the task says its output was capped, with bytes held.
func wantCapped(bytes int64) rowCheck {
	return wantTask(fmt.Sprintf("output capped, %d bytes, not complete", bytes), func(tk *task.Task) bool {
		return tk.OutputCapped && !tk.OutputComplete && tk.OutputBytes == bytes
	})
}

func at(n int64) *int64 { return &n }

// outputCapRows: no output past max_output_bytes is stored or streamed, the task
// says it was cut, and its result still ends it.
var outputCapRows = []machineRow{
	{name: "status up to the cap is kept whole", from: "capped", ev: statusMsg("a1", "abcdef"),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("arm(silence,3s)", "write(1 event,piece)", "notify(status)"),
		check: allOf(wantPieces(task.Piece{Offset: 10, Data: "abcdef"}), wantStatusOutput(at(10), "abcdef"),
			wantTask("not capped", func(tk *task.Task) bool { return !tk.OutputCapped && tk.OutputBytes == 16 }))},
	{name: "status across the cap keeps its bytes below it and says so", from: "capped", ev: statusMsg("a1", "abcdefg"),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs: effList("arm(silence,3s)", "write(2 events,piece)", "notify(state)", "notify(status)"),
		check: allOf(wantPieces(task.Piece{Offset: 10, Data: "abcdef"}), wantStatusOutput(at(10), "abcdef"),
			wantMessages(cappedMsg, ""), wantCapped(16))},
	{name: "status across the cap is cut on a rune boundary", from: "capped", ev: statusMsg("a1", "abcde€"),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "write(2 events,piece)", "notify(state)", "notify(status)"),
		check: allOf(wantPieces(task.Piece{Offset: 10, Data: "abcde"}), wantStatusOutput(at(10), "abcde"), wantCapped(15))},
	{name: "status wholly past the cap stores and streams no output", from: "capped", ev: statusAtMsg("xyz", 1<<40),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "write(2 events)", "notify(state)", "notify(status)"),
		check: allOf(wantPieces(), wantStatusOutput(nil, ""), wantMessages(cappedMsg, ""), wantCapped(10))},
	{name: "chunk claiming a huge total past the cap stores nothing", from: "capped",
		ev: func() event {
			msg := statusAtMsg("xyz", 20)
			msg.env.Payload.(*envelope.WorkStatus).Step.OutputChunk = "bytes 0-3 of 1125899906842624"
			return msg
		}(),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "write(2 events)", "notify(state)", "notify(status)"),
		check: allOf(wantPieces(), wantStatusOutput(nil, ""), wantCapped(10))},
	{name: "status repeating held bytes stores nothing again", from: "capped", ev: statusAtMsg("0123456789", 0),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "write(1 event)", "notify(status)"),
		check: allOf(wantPieces(), wantStatusOutput(at(0), "0123456789"))},
	{name: "status overlapping held bytes stores only the new ones", from: "capped", ev: statusAtMsg("89ab", 8),
		state: task.StateRunning, flags: "attempt=1 accepted",
		effs:  effList("arm(silence,3s)", "write(1 event,piece)", "notify(status)"),
		check: allOf(wantPieces(task.Piece{Offset: 10, Data: "ab"}), wantStatusOutput(at(8), "89ab"))},
	{name: "result past the cap is cut and ends the task", from: "capped", ev: resultMsg(envelope.ResultSuccess, "0123456789abcdefXYZ"),
		state: task.StateSucceeded, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,2 events,replace)"),
		check: allOf(wantFinal, wantMessages(cappedMsg, ""), wantCapped(16), func(t *testing.T, r *run, effs []effect) {
			w := lastWrite(t, effs)
			if *w.replace != "0123456789abcdef" || w.events[1].Result.Output != "0123456789abcdef" ||
				r.t.Result.OutputTotalBytes != 19 {
				t.Errorf("replace %q, result event output %q, total %d", *w.replace, w.events[1].Result.Output, r.t.Result.OutputTotalBytes)
			}
		})},
	{name: "truncated result past the cap ends the task without asking again", from: "capped",
		ev: truncatedMsg(envelope.ResultSuccess, "xyz", 100), state: task.StateSucceeded, flags: "attempt=1 finished accepted",
		effs: effList("stopAll", "stop(silence)", "release(drain)", "write(record,2 events)"),
		check: allOf(wantFinal, wantMessages(cappedMsg, ""), wantCapped(10), func(t *testing.T, r *run, effs []effect) {
			if out := lastWrite(t, effs).events[1].Result.Output; out != "" || !r.t.Result.OutputTruncated {
				t.Errorf("result event output %q, result %+v", out, *r.t.Result)
			}
		})},
}

// TestMachineCapsATasksOutput: see outputCapRows.
func TestMachineCapsATasksOutput(t *testing.T) { runRows(t, outputCapRows) }

var machineTables = [][]machineRow{outputCapRows, routeRows, publishRows, messageRows, noResponderRows, timerRows, cancelRows, agentRows, resumeRows, finishedRows, approvalRows}

// ---- Walks ----

// TestMachineRetriesATimedOutAttemptOnTheSameAgent walks a silent agent through
// every retry: each goes to the same agent after 1 s, 2 s, 4 s, and the fourth
// timeout ends the task 5001.
func TestMachineRetriesATimedOutAttemptOnTheSameAgent(t *testing.T) {
	m := newTestMachine()
	r := stRouting(t, m)
	effs := mustApply(t, m, r, routed{agentID: "a1", version: "1.0"}, task.StateDispatched)
	for i := 1; ; i++ {
		effs = mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
		if got := describe(effs); !slices.Equal(got, effList("publish(a1)", "arm(silence,2s)")) {
			t.Fatalf("attempt %d stored: %q", i, got)
		}
		fire := effectOf[arm](t, effs).fire // the silence timer of attempt i
		if i == 4 {
			effs = mustApply(t, m, r, fire, task.StateError)
			if got, want := describe(effs), failedEffs(5001); !slices.Equal(got, want) {
				t.Fatalf("last timeout:\n got  %q\n want %q", got, want)
			}
			break
		}
		effs = mustApply(t, m, r, fire, task.StatePending)
		wait := time.Second << (i - 1)
		if got, want := describe(effs), retryEffs(5001, wait.String()); !slices.Equal(got, want) {
			t.Fatalf("timeout %d:\n got  %q\n want %q", i, got, want)
		}
		if r.stick != "a1" || r.pinned != "a1" {
			t.Fatalf("timeout %d: stick %q, pinned %q, want a1", i, r.stick, r.pinned)
		}
		due := effs[len(effs)-1].(arm).fire
		if got := describe(mustApply(t, m, r, due, task.StatePending)); !slices.Equal(got, effList("route")) {
			t.Fatalf("retry %d due: %q", i, got)
		}
		effs = mustApply(t, m, r, routed{agentID: r.stick, version: "1.0"}, task.StateDispatched)
	}
	wantRetries(retryOf(1, 5001, "a1", 1000), retryOf(2, 5001, "a1", 2000), retryOf(3, 5001, "a1", 4000))(t, r, effs)
	wantError(5001, ackTimeout)(t, r, effs)
	wantFinal(t, r, effs)
	if r.t.Attempts != 4 || r.t.Error.Context[errcodes.KeyAttemptedRetries] != 3 {
		t.Errorf("attempts %d, error context %v; want 4 attempts, 3 retries", r.t.Attempts, r.t.Error.Context)
	}
}

// TestMachineResumedTaskGoesOnFromTheWaitItReached: a task resumed after one retry
// has two left, of 2 s and 4 s.
func TestMachineResumedTaskGoesOnFromTheWaitItReached(t *testing.T) {
	m := newTestMachine()
	r := stStoredTimedOut(t, m)
	mustApply(t, m, r, resumed{}, task.StatePending)
	for _, wait := range []string{"2s", "4s"} {
		mustApply(t, m, r, routed{agentID: "a1"}, task.StateDispatched)
		effs := mustApply(t, m, r, silence{gen: r.gen, why: ackTimeout}, task.StatePending)
		if got, want := describe(effs), retryEffs(5001, wait); !slices.Equal(got, want) {
			t.Fatalf("got  %q\nwant %q", got, want)
		}
	}
	mustApply(t, m, r, routed{agentID: "a1"}, task.StateDispatched)
	mustApply(t, m, r, silence{gen: r.gen, why: ackTimeout}, task.StateError)
	if len(r.t.Retries) != 3 {
		t.Errorf("%d retries, want 3", len(r.t.Retries))
	}
}

// TestMachineEndsATaskAtOnceOnANonRetryableError: a 5003 from the agent spends no
// retry.
func TestMachineEndsATaskAtOnceOnANonRetryableError(t *testing.T) {
	for _, from := range []string{"dispatched-stored", "running", "pinned-dispatched"} {
		t.Run(from, func(t *testing.T) {
			m := newTestMachine()
			r := machineStates[from](t, m)
			retries := len(r.t.Retries)
			effs := mustApply(t, m, r, errorMsg(errInvalid), task.StateError)
			if got, want := describe(effs), failedEffs(5003); !slices.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if len(r.t.Retries) != retries || !r.finished {
				t.Errorf("retries %d (was %d), finished %v", len(r.t.Retries), retries, r.finished)
			}
			wantError(5003, errInvalid.Message)(t, r, effs)
			wantFinal(t, r, effs)
		})
	}
}

// TestMachineAsksAgainForAGappedOutputAtMostTwice: the third truncated result with
// a gap ends the task with its output incomplete.
func TestMachineAsksAgainForAGappedOutputAtMostTwice(t *testing.T) {
	m := newTestMachine()
	r := stRunning(t, m)
	for i := 1; i <= 2; i++ {
		// the state stays as it was: running, then dispatched
		effs := mustApply(t, m, r, truncatedMsg(envelope.ResultSuccess, "xyz", 100), r.t.State)
		if !slices.Contains(describe(effs), "route") || r.reasks != i || r.stick != "a1" {
			t.Fatalf("reask %d: effects %q, reasks %d, stick %q", i, describe(effs), r.reasks, r.stick)
		}
		effs = mustApply(t, m, r, routed{agentID: r.stick}, task.StateDispatched)
		mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
	}
	effs := mustApply(t, m, r, truncatedMsg(envelope.ResultSuccess, "xyz", 100), task.StateSucceeded)
	if got := describe(effs); !slices.Equal(got, endEffs) {
		t.Errorf("got %q, want %q", got, endEffs)
	}
	if r.t.OutputComplete || r.t.Attempts != 3 {
		t.Errorf("output complete %v, attempts %d", r.t.OutputComplete, r.t.Attempts)
	}
}

// TestMachineKeepsAReaskOnItsAgent: the agent that sent a result ran the request,
// so the re-ask for a gapped output is pinned to it: a "no responders" on the re-ask
// retries it there instead of queueing it for another agent, which would run it
// again.
func TestMachineKeepsAReaskOnItsAgent(t *testing.T) {
	m := newTestMachine()
	r := stRunning(t, m)
	mustApply(t, m, r, truncatedMsg(envelope.ResultSuccess, "xyz", 100), task.StateRunning)
	effs := mustApply(t, m, r, routed{agentID: r.stick}, task.StateDispatched)
	mustApply(t, m, r, storedEvent(t, effs), task.StateDispatched)
	effs = mustApply(t, m, r, noResponders{agentID: "a1", nonce: r.nonce}, task.StatePending)
	if got := describe(effs); slices.Contains(got, "enqueue(head)") || slices.Contains(got, "enqueue(tail)") || r.stick != "a1" || r.avoid != "" {
		t.Fatalf("effects %q, stick %q, avoid %q: want a retry on a1", got, r.stick, r.avoid)
	}
}

// TestMachineDoesNotCountATaskNeverStored: a new task that ends at once (no agent
// offers its work type) and whose only write fails was never stored: Submit refuses
// it, and the end takes it out of the tasks-by-state gauge.
func TestMachineDoesNotCountATaskNeverStored(t *testing.T) {
	m := newTestMachine()
	r := stRouting(t, m)
	effs := mustApply(t, m, r, routed{err: errUnsupported, failFast: true}, task.StateError)
	w := lastWrite(t, effs)
	if fs := w.then(errBoom).(finalStored); !fs.uncount {
		t.Errorf("failed first write: %#v, want uncount", fs)
	}
	if fs := w.then(nil).(finalStored); fs.uncount {
		t.Errorf("committed first write: %#v, want it counted", fs)
	}
	effs = m.apply(r, w.then(errBoom))
	if got, want := describe(effs), []string{"notify(error)", "forget(uncount)"}; !slices.Equal(got, want) {
		t.Errorf("effects %q, want %q", got, want)
	}
}

// ---- Coverage ----

// TestMachineTablesCoverEveryEventAndState fails when an event type of machine.go
// has no row, or a starting state is used by none.
func TestMachineTablesCoverEveryEventAndState(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "machine.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "isEvent" || fn.Recv == nil {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
			declared = append(declared, id.Name)
		}
	}
	if len(declared) < 17 {
		t.Fatalf("found %d event types in machine.go: %q", len(declared), declared)
	}
	events, states := map[string]bool{}, map[string]bool{}
	for _, rows := range machineTables {
		for _, row := range rows {
			events[reflect.TypeOf(row.ev).Name()] = true
			states[row.from] = true
		}
	}
	for _, name := range declared {
		if !events[name] {
			t.Errorf("event %s has no table row", name)
		}
	}
	for _, name := range stateNames() {
		if !states[name] {
			t.Errorf("starting state %q has no table row", name)
		}
	}
}
