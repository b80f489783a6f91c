package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
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
	task := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	head := "first batch\n"
	a.status(w, 10, 1, head, "", 0)
	body := bigOutput(600 << 10) // three chunks
	sendChunked(a, w, int64(len(head)), body, -1)
	whole := head + body
	tail := whole[len(whole)-1000:]
	a.result(w, envelope.ResultSuccess, 0, tail, map[string]any{"output_truncated": true, "output_total_bytes": len(whole)})
	final := waitFinal(t, o, task.ID)
	if final.State != orchestrator.StateSucceeded || !final.OutputComplete || final.OutputBytes != int64(len(whole)) {
		t.Fatalf("got %s complete=%v bytes=%d", final.State, final.OutputComplete, final.OutputBytes)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), task.ID, &out); err != nil || out.String() != whole {
		t.Fatalf("output differs (%d bytes, want %d), err %v", out.Len(), len(whole), err)
	}
}

func TestChunkGapIsRejectedAndOutputAskedAgain(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	task := submit(t, o, nil)
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
	final := waitFinal(t, o, task.ID)
	if final.State != orchestrator.StateSucceeded || !final.OutputComplete {
		t.Fatalf("got %s complete=%v", final.State, final.OutputComplete)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), task.ID, &out); err != nil || out.String() != whole {
		t.Fatalf("output differs (%d bytes, want %d)", out.Len(), len(whole))
	}
	if !strings.Contains(e.logs.String(), "leaves a gap") {
		t.Fatal("the gap was not reported")
	}
}

func TestResultOutputIsAuthoritativeWhenNotTruncated(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	task := submit(t, o, nil)
	w := a.next()
	a.status(w, 10, 1, "partial garbage that is longer", "", 0)
	a.result(w, envelope.ResultSuccess, 0, "the whole output", nil)
	waitFinal(t, o, task.ID)
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), task.ID, &out); err != nil || out.String() != "the whole output" {
		t.Fatalf("output %q", out.String())
	}
}
