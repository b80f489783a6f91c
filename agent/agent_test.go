package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/output"
)

func TestEveryCheckAnswersWithItsCode(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.MaxConcurrency = 1 })
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
	good := func() []byte {
		d, _ := envelope.Encode(h.request("echo", map[string]any{"message": "hi"}, nil))
		return d
	}
	v2 := strings.Replace(string(good()), `"protocol_version":"1.0"`, `"protocol_version":"2.0"`, 1)

	for _, tc := range []struct {
		name, token string
		data        []byte
		code        errcodes.Code
		key, want   string
	}{
		{"missing token", "", good(), errcodes.AuthenticationFailed, errcodes.KeyTokenStatus, "missing"},
		{"wrong token", broker.NewToken(), good(), errcodes.AuthenticationFailed, errcodes.KeyTokenStatus, "invalid"},
		{"not json", h.orchToken, []byte("{nope"), errcodes.InvalidMessage, "", ""},
		{"unknown version", h.orchToken, []byte(v2), errcodes.UnsupportedWorkType, errcodes.KeyVersionRequested, "2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := h.sendRaw(tc.data, tc.token, "")
			p := w.errorReply()
			if unauthenticated := tc.code == errcodes.AuthenticationFailed; w.bare != unauthenticated {
				t.Errorf("answer without the agent's token: %v, want %v", w.bare, unauthenticated)
			}
			if p.ErrorCode != int(tc.code) {
				t.Fatalf("code %d, want %d (%s)", p.ErrorCode, tc.code, p.ErrorMessage)
			}
			if tc.key != "" && p.ErrorContext[tc.key] != tc.want {
				t.Fatalf("context %v, want %s=%s", p.ErrorContext, tc.key, tc.want)
			}
		})
	}

	p := h.send(h.request("paint_fence", nil, nil)).errorReply()
	types, _ := p.ErrorContext[errcodes.KeySupportedTypes].([]any)
	if p.ErrorCode != 5006 || len(types) != 4 {
		t.Fatalf("unknown work type: %d %v", p.ErrorCode, p.ErrorContext)
	}
	p = h.send(h.request("echo", map[string]any{"message": "x"}, &envelope.Hints{MaxMemoryMB: 1 << 40})).errorReply()
	wantLimit(t, p, agent.LimitMemory)

	w := h.send(h.request("block", nil, nil))
	w.waitOutput("started")
	p = h.send(h.request("echo", map[string]any{"message": "x"}, nil)).errorReply()
	wantLimit(t, p, agent.LimitConcurrency)

	ack := h.control(&envelope.Drain{}).Payload.(*envelope.ControlAck)
	if !ack.OK || ack.AgentStatus != envelope.AgentDraining {
		t.Fatalf("drain ack: %+v", ack)
	}
	p = h.send(h.request("echo", map[string]any{"message": "x"}, nil)).errorReply()
	wantLimit(t, p, agent.LimitDraining)
	close(b.release)
	if r, _ := w.result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("blocked task: %+v", r)
	}
}

func wantLimit(t *testing.T, p *envelope.ErrorPayload, limit string) {
	t.Helper()
	if p.ErrorCode != 5005 || p.ErrorContext[errcodes.KeyLimitName] != limit ||
		p.ErrorContext[errcodes.KeyAvailable] == nil || p.ErrorContext[errcodes.KeyRequired] == nil {
		t.Fatalf("want 5005 %s with available and required, got %d %v", limit, p.ErrorCode, p.ErrorContext)
	}
}

// counterWorkType is a subprocess that bumps a counter file: a visible side effect.
func counterWorkType(counter string) agent.WorkTypeConfig {
	return agent.WorkTypeConfig{
		Shell:  `n=$(cat "$COUNTER" 2>/dev/null || echo 0); echo $((n+1)) > "$COUNTER"; echo "run $((n+1))"; echo '{"runs": '$((n+1))'}'`,
		SetEnv: map[string]string{"COUNTER": counter},
	}
}

func readCounter(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestDuplicateAfterSuccessReplaysAndDoesNotRerun(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "counter")
	h := newHarness(t, func(c *agent.Config) {
		c.WorkTypes = map[string]agent.WorkTypeConfig{"bump": counterWorkType(counter)}
	})
	h.start(nil)
	req := h.request("bump", nil, nil)
	w1 := h.send(req)
	r1, e1 := w1.result()
	if r1.Status != envelope.ResultSuccess || r1.Output != "run 1\n{\"runs\": 1}\n" {
		t.Fatalf("first run: %+v", r1)
	}
	if s, _ := json.Marshal(e1.XCustomFields[output.KeyStructured]); string(s) != `{"runs":1}` {
		t.Fatalf("structured output: %s", s)
	}
	w2 := h.send(req)
	r2, _ := w2.result()
	if r2.Output != r1.Output || r2.Status != r1.Status || string(w2.out) != r1.Output {
		t.Fatalf("replay differs: %+v, streamed %q", r2, w2.out)
	}
	if got := readCounter(t, counter); got != "1" {
		t.Fatalf("counter = %s, want 1", got)
	}
}

func TestDuplicateWhileRunningReattaches(t *testing.T) {
	h := newHarness(t, nil)
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
	req := h.request("block", nil, nil)
	w1 := h.send(req)
	w1.waitOutput("started")
	w2 := h.send(req)
	w2.waitOutput("started") // replayed to the new subject
	close(b.release)
	for i, w := range []*watch{w1, w2} {
		r, _ := w.result()
		if r.Status != envelope.ResultSuccess || string(w.out) != "started\nfinished\n" {
			t.Fatalf("subject %d: %+v, streamed %q", i+1, r, w.out)
		}
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

// TestCacheWriteFailureRefusesTheRequest: when the running entry cannot be stored the
// handler must not start (a crash would leave no trace of the run), so the request is
// refused with 5005 dedupe_cache, and a retry of it is refused the same way rather
// than taken for a duplicate of a running request.
func TestCacheWriteFailureRefusesTheRequest(t *testing.T) {
	mc := memCache(t) // its writes can be made to fail
	h := newHarness(t, func(c *agent.Config) { c.DedupeCache = mc })
	var runs atomic.Int32
	h.start(func(a *agent.Agent) {
		a.Handle("count", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			runs.Add(1)
			return agent.Result{}, nil
		})
	})
	agent.BreakCacheWrites(h.agent)
	req := h.request("count", nil, nil)
	for range 2 {
		wantLimit(t, h.send(req).errorReply(), "dedupe_cache")
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times without its running entry stored", n)
	}
}
