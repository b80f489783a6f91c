package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestStepIsCompletedWhenTheNextStarts: each step but the last ends with a
// step_completed status carrying the output written during it; the last is ended by
// the work_result (docs/agent.md).
func TestStepIsCompletedWhenTheNextStarts(t *testing.T) {
	h := newHarness(t, nil)
	h.start(func(a *agent.Agent) {
		a.Handle("steps", func(_ context.Context, _ *agent.Request, p agent.Progress) (agent.Result, error) {
			p.Step("fetch")
			_, _ = p.Write([]byte("fetched\n"))
			p.Step("build")
			_, _ = p.Write([]byte("built\n"))
			return agent.Result{}, nil
		})
	})
	w := h.send(h.request("steps", nil, nil))
	if r, _ := w.result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("result %+v", r)
	}
	completed := map[int64]string{} // step number -> its name and output
	for _, st := range w.statuses {
		if st.Status == envelope.StatusStepCompleted {
			completed[st.Step.Number] += st.Step.Name + ":" + st.Step.Output
		}
	}
	want := map[int64]string{0: "accepted:", 1: "fetch:fetched\n"}
	if len(completed) != len(want) || completed[0] != want[0] || completed[1] != want[1] {
		t.Fatalf("step_completed statuses %v, want %v", completed, want)
	}
	if string(w.out) != "fetched\nbuilt\n" {
		t.Fatalf("output %q", w.out)
	}
}

// TestCancelReasonEndsTheOutput: the reason given with a cancel is the last line of
// the task's output.
func TestCancelReasonEndsTheOutput(t *testing.T) {
	cases := []struct{ reason, want string }{
		{"disk full on web-3", "\nchiffon: cancelled by the orchestrator: disk full on web-3\n"},
		{"", "\nchiffon: cancelled by the orchestrator\n"},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			b := newBlocker()
			h := newHarness(t, nil)
			h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
			req := h.request("block", nil, nil)
			w := h.send(req)
			w.waitOutput("started")
			ack := h.control(&envelope.Cancel{TaskID: req.Payload.(*envelope.WorkRequest).TaskID, Reason: c.reason})
			if !ack.Payload.(*envelope.ControlAck).OK {
				t.Fatalf("cancel ack %+v", ack.Payload)
			}
			r, _ := w.result()
			if r.Status != envelope.ResultCancelled || !strings.HasSuffix(r.Output, c.want) {
				t.Fatalf("result %s, output %q; want it to end with %q", r.Status, r.Output, c.want)
			}
		})
	}
}
