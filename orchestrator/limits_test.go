package orchestrator_test

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// answerAll makes a succeed every work_request it gets, and records when each
// came, until stop is closed.
func (a *fakeAgent) answerAll(stop <-chan struct{}) *arrivals {
	got := &arrivals{}
	go func() {
		for {
			select {
			case w := <-a.work:
				got.add(w.at)
				a.succeed(w)
			case <-stop:
				return
			}
		}
	}()
	return got
}

// arrivals are the times work_requests came to an agent.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (r *arrivals) add(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, t)
}

func (r *arrivals) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// spread is the time from the first arrival to the last, and the shortest gap
// between two in a row.
func spread(at []time.Time) (total, minGap time.Duration) {
	if len(at) < 2 {
		return 0, 0
	}
	minGap = time.Hour
	for i := 1; i < len(at); i++ {
		minGap = min(minGap, at[i].Sub(at[i-1]))
	}
	return at[len(at)-1].Sub(at[0]), minGap
}

// submitMany submits n echo tasks and waits for each to succeed.
func submitMany(t *testing.T, o *orchestrator.Orchestrator, n int) {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, submit(t, o, nil).ID)
	}
	for _, id := range ids {
		if final := waitFinal(t, o, id); final.State != task.StateSucceeded {
			t.Fatalf("task %s: %s %+v, want succeeded", id, final.State, final.Error)
		}
	}
}

// TestAgentRateLimitSpacesDispatches: with rate_limit 5/s, 50 tasks submitted at
// once reach the agent one every 200 ms (the first at once), all succeeding:
// those waiting are queued, not failed. The wait is logged with its reason and
// counted.
func TestAgentRateLimitSpacesDispatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "code-1")
	e.mem = true // the store's commits out of the measure
	e.cfg.Agents[0].RateLimit = "5/s"
	o, a := e.openWithAgent("code-1", 64)
	stop := make(chan struct{})
	defer close(stop)
	got := a.answerAll(stop)
	start := time.Now()
	submitMany(t, o, 50)
	at := got.times()
	total, minGap := spread(at)
	t.Logf("50 tasks at 5/s: %d arrivals over %s, shortest gap %s, all done in %s", len(at), total, minGap, time.Since(start))
	if len(at) != 50 || total < 8500*time.Millisecond || minGap < 100*time.Millisecond {
		t.Fatalf("%d work_requests over %s, shortest gap %s; want 50 over >= 8.5s, gaps >= 100ms (200ms apart, less the delivery's jitter)", len(at), total, minGap)
	}
	if !regexp.MustCompile(`task queued: rate limit of agent code-1 \(5/s\) until 20\d\d-`).MatchString(e.logs.String()) {
		t.Errorf("no log of a task queued by the rate limit")
	}
	_, metrics := call(t, e.client(o), "GET", "/metrics", "", "")
	if !regexp.MustCompile(`chiffon_orchestrator_rate_limited_total\{agent_id="code-1"\} [1-9]`).MatchString(metrics) {
		t.Errorf("rate-limit holds not counted:\n%s", grepLines(metrics, "rate_limited"))
	}
	if info := agentInfo(t, e.client(o), "code-1"); info.Limits == nil || info.Limits.RateLimit != "5/s" {
		t.Errorf("code-1's limits shown as %+v, want rate_limit 5/s", info.Limits)
	}
	// The last task waited longest: its history says why and until when.
	tasks, err := o.Tasks(api.ListOptions{Limit: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks: %v", err)
	}
	evs, err := o.History(tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	held := false
	for _, ev := range evs {
		held = held || regexp.MustCompile(`^queued: rate limit of agent code-1 \(5/s\) until 20\d\d-`).MatchString(ev.Message)
	}
	if !held {
		t.Errorf("the history of a task the limit held back does not say so: %+v", evs)
	}
}

// TestWorkTypeRateLimitIsPerAgent: work_types.echo.rate_limit 5/s holds on each
// agent alone: two agents take 50 tasks in about 5 s, each at 5/s.
func TestWorkTypeRateLimitIsPerAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "code-1", "code-2")
	e.mem = true
	e.cfg.WorkTypes = map[string]policy.WorkTypeConfig{"echo": {Limits: policy.Limits{RateLimit: "5/s"}}}
	o := e.open()
	stop := make(chan struct{})
	defer close(stop)
	var got []*arrivals
	for _, id := range []string{"code-1", "code-2"} {
		a := e.fakeAgent(id)
		a.listen()
		a.register(64)
		got = append(got, a.answerAll(stop))
	}
	start := time.Now()
	submitMany(t, o, 50)
	var all []time.Time
	for i, g := range got {
		at := g.times()
		total, minGap := spread(at)
		t.Logf("code-%d: %d arrivals over %s, shortest gap %s", i+1, len(at), total, minGap)
		if len(at) < 20 || minGap < 100*time.Millisecond {
			t.Errorf("code-%d got %d work_requests, shortest gap %s; want about 25, gaps >= 100ms (200ms apart, less the delivery's jitter)", i+1, len(at), minGap)
		}
		all = append(all, at...)
	}
	took := time.Since(start)
	t.Logf("50 tasks on two agents at 5/s each: all done in %s", took)
	if len(all) != 50 || took < 4*time.Second || took > 7500*time.Millisecond {
		t.Fatalf("%d work_requests in %s; want 50 in about 5 s (one 5/s for all would take 10 s)", len(all), took)
	}
}

// TestOversizedRequestsAreRefused: a request over its work type's
// max_request_bytes is refused at submit (HTTP 413 too_large) naming that
// limit, and so is one pinned to an agent whose max_request_bytes it is over.
// Unpinned, a request too large for one agent goes to another; for every agent
// that could take it, it fails at once (5005) naming the limit.
func TestOversizedRequestsAreRefused(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.WorkTypes = map[string]policy.WorkTypeConfig{"echo": {Limits: policy.Limits{MaxRequestBytes: 2048}}}
	e.cfg.Agents[0].MaxRequestBytes = 4096
	o := e.open()
	c := e.client(o)
	small := e.fakeAgent("code-1")
	small.listen()
	small.registerOffering(4, "echo", "big")
	if info := agentInfo(t, c, "code-1"); info.Limits == nil || info.Limits.MaxRequestBytes != 4096 {
		t.Fatalf("code-1's limits shown as %+v, want max_request_bytes 4096", info.Limits)
	}
	text := func(n int) map[string]any { return map[string]any{"text": strings.Repeat("x", n)} }

	refused := []struct {
		name     string
		req      api.SubmitRequest
		wantText string
		limit    int
	}{
		{"work type", api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo", Parameters: text(3000)},
			"work_types.echo.max_request_bytes (2048 bytes)", 2048},
		{"pinned", api.SubmitRequest{ToAgent: envelope.Code, WorkType: "big", Parameters: text(5000),
			Hints: &task.Hints{AgentID: "code-1"}}, "agents[code-1].max_request_bytes (4096 bytes)", 4096},
	}
	for _, tc := range refused {
		_, err := c.Submit(t.Context(), tc.req)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || ae.Code != "too_large" ||
			!strings.Contains(ae.Message, tc.wantText) {
			t.Errorf("%s: %v, want HTTP 413 too_large naming %s", tc.name, err, tc.wantText)
		}
		_, err = o.Submit(t.Context(), tc.req)
		var tle *core.TooLargeError
		if !errors.As(err, &tle) || tle.Limit != tc.limit || tle.Size <= tc.limit {
			t.Errorf("%s: Submit: %v, want a *core.TooLargeError over %d", tc.name, err, tc.limit)
		}
	}
	tasks, err := c.List(t.Context(), api.ListOptions{})
	if err != nil || len(tasks) != 0 {
		t.Fatalf("refused tasks stored: %v %d", err, len(tasks))
	}
	// Below the limits it goes.
	ok := submitWork(t, o, "echo", text(1000), nil)
	small.succeed(small.next())
	if final := waitFinal(t, o, ok.ID); final.State != task.StateSucceeded {
		t.Fatalf("a request below the limits: %s", final.State)
	}

	// Unpinned and too large for code-1, the only agent: it fails at once.
	lone := submitWork(t, o, "big", text(5000), nil)
	final := waitFinal(t, o, lone.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != int(errcodes.ResourceLimitExceeded) ||
		!strings.Contains(final.Error.Message, "agents[code-1].max_request_bytes") || final.Attempts != 0 {
		t.Fatalf("too large for every agent: %s %+v after %d attempts, want error 5005 naming the limit, not sent",
			final.State, final.Error, final.Attempts)
	}
	noWork(t, small, 100*time.Millisecond)

	// With code-2, which has no limit, such requests go there, and small ones
	// still go to code-1.
	large := e.fakeAgent("code-2")
	large.listen()
	large.registerOffering(4, "echo", "big")
	var ids []string
	for range 3 {
		ids = append(ids, submitWork(t, o, "big", text(5000), nil).ID)
	}
	for range 3 {
		large.succeed(large.next())
	}
	for _, id := range ids {
		if final := waitFinal(t, o, id); final.State != task.StateSucceeded || final.AgentID != "code-2" {
			t.Fatalf("large task %s: %s on %s, want succeeded on code-2", id, final.State, final.AgentID)
		}
	}
	noWork(t, small, 100*time.Millisecond)
	pinned := submitWork(t, o, "big", text(100), &task.Hints{AgentID: "code-1"})
	small.succeed(small.next())
	if final := waitFinal(t, o, pinned.ID); final.State != task.StateSucceeded {
		t.Fatalf("a small request pinned to code-1: %s", final.State)
	}
	if _, metrics := call(t, c, "GET", "/metrics", "", ""); !strings.Contains(metrics, "chiffon_orchestrator_tasks_too_large_total 4") {
		t.Errorf("refusals not counted:\n%s", grepLines(metrics, "too_large"))
	}

	// A batch over both agents whose task is too large for code-1 is refused as
	// a task pinned there is, and nothing of it is made.
	_, err = c.CreateBatch(t.Context(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "big", Parameters: text(5000)})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || !strings.Contains(ae.Message, "agents[code-1].max_request_bytes") {
		t.Fatalf("a batch too large for code-1: %v, want HTTP 413 naming its limit", err)
	}
	if bs, err := c.Batches(t.Context(), 0); err != nil || len(bs) != 0 {
		t.Fatalf("a refused batch stored: %v %d", err, len(bs))
	}
}

// grepLines are the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
