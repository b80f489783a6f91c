package orchestrator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// call sends a raw request and returns the status and body.
func call(t *testing.T, c *client.Client, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, c.BaseURL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPIErrorAnswers(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	c := e.client(o)
	tok := e.cfg.APIToken
	wrong := "x" + tok[1:] // a random token starts with 'x' one time in 62
	if wrong == tok {
		wrong = "y" + tok[1:]
	}
	missing := "/api/v1/tasks/00000000-0000-4000-8000-000000000000"
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
	}{
		{"no token", "GET", "/api/v1/tasks", "", "", 401, "Authorization"},
		{"wrong token", "GET", "/api/v1/agents", wrong, "", 401, "Authorization"},
		{"empty body", "POST", "/api/v1/tasks", tok, "", 400, ""},
		{"not json", "POST", "/api/v1/tasks", tok, "{", 400, ""},
		{"unknown field", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo","priority":1}`, 400, "priority"},
		{"bad to_agent", "POST", "/api/v1/tasks", tok, `{"to_agent":"robot","work_type":"echo"}`, 400, "to_agent"},
		{"orchestrator as to_agent", "POST", "/api/v1/tasks", tok, `{"to_agent":"orchestrator","work_type":"echo"}`, 400, "to_agent"},
		{"bad work_type", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"Echo!"}`, 400, "work_type"},
		{"parameters not an object", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo","parameters":[1]}`, 400, "parameters"},
		{"hint of the wrong type", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo","hints":{"max_duration_seconds":"x"}}`, 400, "hints.max_duration_seconds"},
		{"negative hint", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo","hints":{"max_memory_mb":-1}}`, 400, "hints.max_memory_mb"},
		{"bad pinned agent", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo","hints":{"agent_id":"a b"}}`, 400, "hints.agent_id"},
		{"two values", "POST", "/api/v1/tasks", tok, `{"to_agent":"code","work_type":"echo"} {}`, 400, ""},
		{"bad state filter", "GET", "/api/v1/tasks?state=done", tok, "", 400, "state"},
		{"bad agent_type filter", "GET", "/api/v1/tasks?agent_type=x", tok, "", 400, "agent_type"},
		{"bad limit", "GET", "/api/v1/tasks?limit=0", tok, "", 400, "limit"},
		{"bad task id", "GET", "/api/v1/tasks/nope", tok, "", 400, "id"},
		{"unknown task", "GET", missing, tok, "", 404, "id"},
		{"unknown task output", "GET", missing + "/output", tok, "", 404, "id"},
		{"unknown task events", "GET", missing + "/events", tok, "", 404, "id"},
		{"unknown task cancel", "POST", missing + "/cancel", tok, "", 404, "id"},
		{"unknown endpoint", "GET", "/api/v1/nothing", tok, "", 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, c, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if !strings.Contains(body, `"error"`) || tc.field != "" && !strings.Contains(body, `"field":"`+tc.field+`"`) {
				t.Fatalf("body %s does not name field %q", body, tc.field)
			}
		})
	}
	if status, _ := call(t, c, "GET", "/api/v1/tasks", tok, ""); status != 200 {
		t.Fatalf("list: %d", status)
	}
	var apiErr *client.APIError
	if _, err := c.Get(t.Context(), "nope"); !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != "id" {
		t.Fatalf("client error: %v", err)
	}
}

func TestAPITaskLifecycle(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	c := e.client(o)
	ctx := t.Context()
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(4)

	tsk, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo",
		Parameters: map[string]any{"text": "hello"}, Hints: &task.Hints{MaxMemoryMB: 64}})
	if err != nil || tsk.ID == "" || tsk.RequestID == "" || tsk.TraceID == "" {
		t.Fatalf("submit: %v %+v", err, tsk)
	}
	w := a.next()
	if w.req.Parameters["text"] != "hello" || w.req.Hints.MaxMemoryMB != 64 {
		t.Fatalf("work_request %+v", w.req)
	}
	a.ack(w)
	a.status(w, 40, 1, "line one\n", "", 0)

	// The event stream replays the history, then follows live until the end.
	events := make(chan *task.Event, 64)
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- c.Events(ctx, tsk.ID, func(ev *task.Event) error { events <- ev; return nil })
	}()
	next := func() *task.Event {
		select {
		case ev := <-events:
			return ev
		case err := <-streamErr:
			t.Fatalf("stream ended: %v", err)
		case <-time.After(wait):
			t.Fatal("no event")
		}
		return nil
	}
	var statuses int
	for statuses < 2 { // the ack and the first status come from the history
		if ev := next(); ev.Type == task.EventStatus {
			statuses++
		}
	}
	got, err := c.Get(ctx, tsk.ID)
	if err != nil || got.State != task.StateRunning || got.ProgressPercent != 40 || len(got.Steps) != 2 || got.AgentID != "code-1" {
		t.Fatalf("get: %v %+v", err, got)
	}
	a.status(w, 80, 2, "line two\n", "", 9)
	if ev := next(); ev.Type != task.EventStatus || ev.Status.Step.Output != "line two\n" || *ev.OutputOffset != 9 {
		t.Fatalf("live event %+v", ev)
	}
	a.result(w, envelope.ResultSuccess, 0, "line one\nline two\n", nil)
	var last *task.Event
	for last == nil || !last.State.Final() {
		last = next()
	}
	if last.Type != task.EventResult || last.State != task.StateSucceeded {
		t.Fatalf("last event %+v", last)
	}
	if err := <-streamErr; err != nil {
		t.Fatalf("stream: %v", err)
	}

	var out strings.Builder
	if complete, err := c.Output(ctx, tsk.ID, &out); err != nil || !complete || out.String() != "line one\nline two\n" {
		t.Fatalf("output %q complete %v err %v", out.String(), complete, err)
	}
	list, err := c.List(ctx, api.ListOptions{State: task.StateSucceeded, AgentType: envelope.Code, Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID != tsk.ID {
		t.Fatalf("list: %v %d", err, len(list))
	}
	if list, _ := c.List(ctx, api.ListOptions{State: task.StateRunning}); len(list) != 0 {
		t.Fatalf("filter by state kept %d", len(list))
	}
	var apiErr *client.APIError
	if _, err := c.Cancel(ctx, tsk.ID, ""); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("cancel of a finished task: %v", err)
	}
	agents, err := c.Agents(ctx)
	if err != nil || len(agents) != 1 || agents[0].State != "online" || agents[0].Breaker != "closed" ||
		agents[0].ProtocolVersion != "1.0" || agents[0].Capacity != 4 {
		t.Fatalf("agents: %v %+v", err, agents)
	}
}

func TestAPICancelTellsTheAgent(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	c := e.client(o)
	a := e.fakeAgent("code-1")
	var w *workMsg
	a.onCancel = func(*envelope.Cancel) {
		go a.result(w, envelope.ResultCancelled, 130, "stopped", nil)
	}
	a.listen()
	a.register(4)
	tsk := submit(t, o, nil)
	w = a.next()
	a.ack(w)
	waitFor(t, "running", func() bool { tk, _ := o.Task(tsk.ID); return tk.State == task.StateRunning })
	if _, err := c.Cancel(t.Context(), tsk.ID, ""); err != nil {
		t.Fatal(err)
	}
	if ctl := a.nextControl(); ctl.Type != envelope.TypeCancel || ctl.Payload.(*envelope.Cancel).TaskID != tsk.ID {
		t.Fatalf("control %+v", ctl)
	}
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateCancelled || final.Result.ExitCode != 130 {
		t.Fatalf("got %s %+v", final.State, final.Result)
	}
}

func TestAPICancelQueuedTask(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	c := e.client(o)
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(1)
	submit(t, o, nil)
	queued := submit(t, o, nil)
	got, err := c.Cancel(t.Context(), queued.ID, "")
	if err != nil || got.State != task.StateCancelled {
		t.Fatalf("cancel queued: %v %+v", err, got)
	}
}

func TestHealthReadyAndMetrics(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	c := e.client(o)
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "", nil)
	waitFinal(t, o, tsk.ID)
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body := call(t, c, "GET", p, "", ""); status != 200 || !strings.Contains(body, "status") {
			t.Fatalf("%s: %d %s", p, status, body)
		}
	}
	status, body := call(t, c, "GET", "/metrics", "", "")
	for _, want := range []string{
		`chiffon_orchestrator_tasks{state="succeeded"} 1`,
		"chiffon_orchestrator_dispatch_latency_seconds",
		`chiffon_orchestrator_breaker_state`,
		`chiffon_orchestrator_messages_total{direction="in",type="work_result"} 1`,
		`chiffon_orchestrator_messages_total{direction="out",type="work_request"} 1`,
	} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	o.Close()
	if status, _ := call(t, c, "GET", "/readyz", "", ""); status != 503 {
		t.Fatalf("readyz after close: %d", status)
	}
}

func TestAPIRefusesATaskTooLargeForTheBrokerBeforeStoringIt(t *testing.T) {
	cases := []struct {
		name       string
		maxPayload int32 // the broker's; 0 is NATS's default, 1 MiB
		wantLimit  int
	}{
		{"default broker", 0, envelope.MaxEnvelopeSize - 1024},
		{"broker with a smaller max_payload", 64 << 10, 64<<10 - 1024},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "code-1")
			if tc.maxPayload != 0 {
				e.srv = testnats.Restart(t, e.srv, broker.ServerConfig{MaxPayload: tc.maxPayload})
			}
			o, a := e.openWithAgent("code-1", 4)
			c := e.client(o)
			withText := func(n int) api.SubmitRequest {
				return api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo",
					Parameters: map[string]any{"text": strings.Repeat("x", n)}}
			}
			post := func(n int) (int, string) {
				b, _ := json.Marshal(withText(n))
				return call(t, c, "POST", "/api/v1/tasks", e.cfg.APIToken, string(b))
			}

			// Submit measures the work_request: from one size, the text that makes
			// it exactly the limit follows (an ASCII byte is a byte of JSON).
			probe := tc.wantLimit
			_, err := o.Submit(t.Context(), withText(probe))
			var tle *core.TooLargeError
			if !errors.As(err, &tle) || !errors.Is(err, core.ErrTooLarge) {
				t.Fatalf("Submit of %d bytes of text: %v, want a *core.TooLargeError", probe, err)
			}
			if tle.Limit != tc.wantLimit || tle.Size <= tle.Limit {
				t.Fatalf("TooLargeError %+v, want limit %d", tle, tc.wantLimit)
			}
			fits := probe - (tle.Size - tle.Limit)

			status, body := post(fits + 1)
			var eb api.ErrorBody
			if status != http.StatusRequestEntityTooLarge || json.Unmarshal([]byte(body), &eb) != nil ||
				eb.Error.Code != "too_large" || eb.Error.Field != "parameters" ||
				!strings.Contains(eb.Error.Message, fmt.Sprintf("%d bytes, over the limit of %d bytes", tle.Limit+1, tle.Limit)) {
				t.Fatalf("one byte over: %d %s", status, body)
			}
			if list, err := c.List(t.Context(), api.ListOptions{}); err != nil || len(list) != 0 {
				t.Fatalf("a refused task was stored: %v %d", err, len(list))
			}
			select {
			case w := <-a.work:
				t.Fatalf("a refused task was sent: %s", w.req.TaskID)
			default:
			}
			if agents, err := c.Agents(t.Context()); err != nil || len(agents) != 1 || agents[0].Breaker != "closed" || agents[0].Load != 0 {
				t.Fatalf("agents after refusals: %v %+v", err, agents)
			}
			if _, metrics := call(t, c, "GET", "/metrics", "", ""); !strings.Contains(metrics, "chiffon_orchestrator_tasks_too_large_total 2") {
				t.Errorf("metrics do not count 2 refusals")
			}

			// Exactly the limit is accepted, goes out and arrives whole.
			if status, body := post(fits); status != http.StatusCreated {
				t.Fatalf("at the limit: %d %s", status, body)
			}
			w := a.next()
			if text, _ := w.req.Parameters["text"].(string); len(text) != fits {
				t.Fatalf("agent got %d bytes of text, want %d", len(text), fits)
			}
		})
	}
}
