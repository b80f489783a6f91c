package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

// bigOutput is distinct text of n bytes, so misplaced bytes show.
func bigOutput(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 97))
		b.WriteByte('\n')
	}
	return b.String()[:n]
}

// sendChunked streams text as chunks placed at base, skipping chunk index skip.
func sendChunked(a *fakeAgent, w *workMsg, base int64, text string, skip int) {
	for i, c := range output.Split(text, envelope.MaxChunkSize) {
		if i == skip {
			continue
		}
		a.status(w, 50, 1, c.Data, c.Range.String(), base+c.Range.Start)
	}
}

func TestChunkedOutputIsReassembled(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	head := "first batch\n"
	a.status(w, 10, 1, head, "", 0)
	body := bigOutput(600 << 10) // three chunks
	sendChunked(a, w, int64(len(head)), body, -1)
	whole := head + body
	tail := whole[len(whole)-1000:]
	a.result(w, envelope.ResultSuccess, 0, tail, map[string]any{"output_truncated": true, "output_total_bytes": len(whole)})
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || !final.OutputComplete || final.OutputBytes != int64(len(whole)) {
		t.Fatalf("got %s complete=%v bytes=%d", final.State, final.OutputComplete, final.OutputBytes)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != whole {
		t.Fatalf("output differs (%d bytes, want %d), err %v", out.Len(), len(whole), err)
	}
}

func TestChunkGapIsRejectedAndOutputAskedAgain(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	whole := bigOutput(700 << 10)
	sendChunked(a, w, 0, whole, 1) // the middle chunk is lost
	trunc := map[string]any{"output_truncated": true, "output_total_bytes": len(whole)}
	a.result(w, envelope.ResultSuccess, 0, whole[len(whole)-100:], trunc)
	// The orchestrator asks again with the same request_id; the cache replays it all.
	again := a.next()
	if again.env.RequestID != w.env.RequestID {
		t.Fatal("re-request changed request_id")
	}
	sendChunked(a, again, 0, whole, -1)
	a.result(again, envelope.ResultSuccess, 0, whole[len(whole)-100:], trunc)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || !final.OutputComplete {
		t.Fatalf("got %s complete=%v", final.State, final.OutputComplete)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != whole {
		t.Fatalf("output differs (%d bytes, want %d)", out.Len(), len(whole))
	}
	if !strings.Contains(e.logs.String(), "leaves a gap") {
		t.Fatal("the gap was not reported")
	}
}

func TestResultOutputIsAuthoritativeWhenNotTruncated(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.status(w, 10, 1, "partial garbage that is longer", "", 0)
	a.result(w, envelope.ResultSuccess, 0, "the whole output", nil)
	waitFinal(t, o, tsk.ID)
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != "the whole output" {
		t.Fatalf("output %q", out.String())
	}
}

// TestAgentStreamingPastMaxOutputBytesIsCut: an agent that ignores its own
// max_output_bytes (or a stolen identity) streams far more than the
// orchestrator's max_output_bytes for its task, in chunks, in pieces past the cap,
// in repeats of the bytes held and in a chunk claiming a petabyte. The store holds
// the first max_output_bytes once, no stream carries a byte past them, and the
// task still ends with its result, saying its output was cut.
func TestAgentStreamingPastMaxOutputBytesIsCut(t *testing.T) {
	const maxOutput = 64 << 10
	e := newEnv(t, "code-1")
	e.cfg.MaxOutputBytes = maxOutput
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	whole := bigOutput(1 << 20)
	sendChunked(a, w, 0, whole, -1) // four 256 KiB chunks: the first crosses the cap
	for off := int64(len(whole)); off < 4<<20; off += 200 << 10 {
		a.status(w, 50, 2, bigOutput(200<<10), "", off) // wholly past the cap
	}
	for off := range int64(16) {
		a.status(w, 60, 3, whole[off:off+32<<10], "", off) // repeats of held bytes
	}
	a.status(w, 70, 4, "xyz", "bytes 0-3 of 1125899906842624", 0)
	trunc := map[string]any{"output_truncated": true, "output_total_bytes": 4 << 20}
	a.result(w, envelope.ResultSuccess, 0, whole[len(whole)-1000:], trunc)

	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.Result == nil || !final.OutputCapped ||
		final.OutputComplete || final.OutputBytes != maxOutput {
		t.Fatalf("got %s capped=%v complete=%v bytes=%d result %+v", final.State, final.OutputCapped,
			final.OutputComplete, final.OutputBytes, final.Result)
	}
	stored, err := orchestrator.StoredOutputBytes(o, tsk.ID)
	if err != nil || stored != maxOutput {
		t.Fatalf("the store holds %d bytes of output (err %v), want %d", stored, err, maxOutput)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != whole[:maxOutput] {
		t.Fatalf("output: %d bytes, want the first %d (err %v)", out.Len(), maxOutput, err)
	}
	var streamed int64
	noted := false
	err = e.client(o).Events(t.Context(), tsk.ID, func(ev *task.Event) error {
		if ev.Status != nil && ev.Status.Step.Output != "" {
			streamed += int64(len(ev.Status.Step.Output))
			if ev.OutputOffset == nil || *ev.OutputOffset+int64(len(ev.Status.Step.Output)) > maxOutput {
				t.Errorf("event %d carries output past the cap: %d bytes at %v", ev.Seq, len(ev.Status.Step.Output), ev.OutputOffset)
			}
		}
		if ev.Result != nil && len(ev.Result.Output) > 0 {
			t.Errorf("result event carries %d bytes past the cap", len(ev.Result.Output))
		}
		noted = noted || strings.Contains(ev.Message, "output over max_output_bytes")
		return nil
	})
	if err != nil || !noted {
		t.Fatalf("events: err %v, cap noted in the history: %v", err, noted)
	}
	// The repeats (16 of 32 KiB, and "xyz" at 0) are streamed again; nothing past
	// the cap is.
	if want := int64(maxOutput + 16*32<<10 + 3); streamed != want {
		t.Errorf("status events carry %d bytes of output, want %d", streamed, want)
	}
}
