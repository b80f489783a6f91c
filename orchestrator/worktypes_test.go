package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
)

// deploySpec is a work type's spec as an agent declares it: an integer, an
// enum and a required string.
func deploySpec(approval string) worktype.Spec {
	return worktype.Spec{Description: "Deploys a service.", Approval: approval,
		Parameters: map[string]any{"type": "object", "required": []any{"service"},
			"properties": map[string]any{
				"service":  map[string]any{"type": "string"},
				"replicas": map[string]any{"type": "integer", "minimum": 1},
				"mode":     map[string]any{"enum": []any{"rolling", "recreate"}},
			}}}
}

// specAgent runs a real agent id of type code offering deploy with spec, and
// counts the deploys it runs.
func (e *env) specAgent(id string, spec worktype.Spec) *atomic.Int32 {
	e.t.Helper()
	a, err := agent.New(agent.Config{ID: id, Type: "code", NATS: broker.NATSConfig{URLs: []string{e.srv.ClientURL()}},
		DataDir: e.t.TempDir(), Token: e.tokens[id], OrchestratorToken: e.orchTokens[id],
		HeartbeatInterval: agent.Duration(time.Second), DrainTimeout: agent.Duration(time.Second),
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)).With("side", "agent")})
	if err != nil {
		e.t.Fatalf("agent.New: %v", err)
	}
	var ran atomic.Int32
	if err := a.HandleSpec("deploy", spec, func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		ran.Add(1)
		return agent.Result{Output: "deployed"}, nil
	}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Ready():
	case err := <-done:
		e.t.Fatalf("agent.Run: %v", err)
	case <-time.After(wait):
		e.t.Fatal("agent not ready")
	}
	return &ran
}

// refused422 is the API's 422 err, or a failure of the test.
func refused422(t *testing.T, what string, err error) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
		t.Fatalf("%s: got %v, want 422", what, err)
	}
	return ae
}

// TestTheCatalogueRefusesATaskAtTheDoor: parameters that fail the schema of the
// agent offering the work type, or a work type no agent of the type offers, are
// answered 422 naming the field and what was wanted, and nothing is stored or
// sent: no task, no batch, no schedule, no run on the agent.
func TestTheCatalogueRefusesATaskAtTheDoor(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	ran := e.specAgent("code-1", deploySpec(""))
	c := e.client(o)
	ctx := t.Context()
	cases := []struct {
		name                 string
		workType             string
		params               map[string]any
		code, field, pointer string
		message              string
	}{
		{"wrong type", "deploy", map[string]any{"service": "web", "replicas": "2"},
			"invalid_parameter", "parameters", "/replicas", "got string, want integer"},
		{"below minimum", "deploy", map[string]any{"service": "web", "replicas": 0},
			"invalid_parameter", "parameters", "/replicas", "minimum"},
		{"missing required", "deploy", map[string]any{"replicas": 2},
			"invalid_parameter", "parameters", "", "missing property 'service'"},
		{"enum", "deploy", map[string]any{"service": "web", "mode": "yolo"},
			"invalid_parameter", "parameters", "/mode", "'rolling', 'recreate'"},
		{"built-in echo's schema", "echo", map[string]any{"message": 7},
			"invalid_parameter", "parameters", "/message", "want string"},
		{"unknown work type", "resize", nil,
			"unknown_work_type", "work_type", "", "offered: deploy, echo, sleep, system_info"},
	}
	for _, tc := range cases {
		req := api.SubmitRequest{ToAgent: envelope.Code, WorkType: tc.workType, Parameters: tc.params}
		_, err := c.Submit(ctx, req)
		ae := refused422(t, tc.name, err)
		if ae.Code != tc.code || ae.Field != tc.field || ae.Pointer != tc.pointer || !strings.Contains(ae.Message, tc.message) {
			t.Errorf("%s: got %s %s %q %q, want %s %s %q and %q", tc.name, ae.Code, ae.Field, ae.Pointer, ae.Message,
				tc.code, tc.field, tc.pointer, tc.message)
		}
		_, err = c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: tc.workType, Parameters: tc.params})
		refused422(t, tc.name+" as a batch", err)
		_, err = c.AddSchedule(ctx, api.ScheduleSpec{Name: "s", Cron: "@hourly", Task: &req})
		refused422(t, tc.name+" as a schedule", err)
	}
	if ts, err := o.Tasks(api.ListOptions{}); err != nil || len(ts) != 0 {
		t.Fatalf("tasks stored: %d (%v), want none", len(ts), err)
	}
	if bs, _ := c.Batches(ctx, 0); len(bs) != 0 {
		t.Errorf("batches stored: %d, want none", len(bs))
	}
	if ss, _ := c.Schedules(ctx); len(ss) != 0 {
		t.Errorf("schedules stored: %d, want none", len(ss))
	}
	// What the schema takes runs.
	tk, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy",
		Parameters: map[string]any{"service": "web", "replicas": 2, "mode": "rolling"}})
	if err != nil {
		t.Fatal(err)
	}
	if final := waitFinal(t, o, tk.ID); final.State != task.StateSucceeded {
		t.Fatalf("valid deploy: %s %+v", final.State, final.Error)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the agent ran deploy %d times, want once (the valid task only)", n)
	}
}

// TestUnknownWorkTypeWaitsForEveryConfiguredAgent: while an agent of the type
// has not registered, nobody can say the work type is unknown: the task is
// taken (and routing answers it).
func TestUnknownWorkTypeWaitsForEveryConfiguredAgent(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	o := e.open()
	e.specAgent("code-1", deploySpec(""))
	if _, err := o.Submit(t.Context(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "resize"}); err != nil {
		t.Fatalf("with code-2 not registered: %v, want the task taken", err)
	}
	// Pinned to the registered agent, its own catalogue answers.
	_, err := o.Submit(t.Context(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "resize",
		Hints: &task.Hints{AgentID: "code-1"}})
	var we *api.WorkTypeError
	if !errors.As(err, &we) || we.Code != "unknown_work_type" || !strings.Contains(we.Message, "agent code-1 does not offer") {
		t.Fatalf("pinned to code-1: %v, want unknown_work_type", err)
	}
}

// TestAgentsThatDisagreeAreAllChecked: two agents declare different schemas for
// one work type: the API shows both variants, and a task must satisfy each,
// the refusal naming the agent whose schema refused it; pinned to one, only its
// schema counts. An agent's own approval: required holds a task pinned to it.
func TestAgentsThatDisagreeAreAllChecked(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	o := e.open()
	e.specAgent("code-1", deploySpec(""))
	strict := deploySpec(worktype.ApprovalRequired)
	strict.Parameters["required"] = []any{"service", "replicas"}
	e.specAgent("code-2", strict)
	c := e.client(o)
	ctx := t.Context()

	wt, err := getWorkType(ctx, c, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if len(wt.Variants) != 2 || !slices.Equal(wt.Agents, []string{"code-1", "code-2"}) ||
		!slices.Equal(wt.ApprovalAgents, []string{"code-2"}) || wt.Description != "Deploys a service." {
		t.Fatalf("deploy as listed: %+v", wt)
	}
	_, err = c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy",
		Parameters: map[string]any{"service": "web"}})
	if ae := refused422(t, "valid for code-1 only", err); !strings.Contains(ae.Message, "the schema of agent code-2") {
		t.Fatalf("refusal %q does not name code-2's schema", ae.Message)
	}
	tk, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy",
		Parameters: map[string]any{"service": "web"}, Hints: &task.Hints{AgentID: "code-1"}})
	if err != nil {
		t.Fatalf("pinned to code-1, whose schema takes it: %v", err)
	}
	if final := waitFinal(t, o, tk.ID); final.State != task.StateSucceeded {
		t.Fatalf("pinned to code-1: %s", final.State)
	}
	tk, err = c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy",
		Parameters: map[string]any{"service": "web", "replicas": 1}, Hints: &task.Hints{AgentID: "code-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != task.StateAwaitingApproval || !strings.Contains(tk.Approval.Why, "code-2") {
		t.Fatalf("pinned to code-2, which asks for approval: %s %+v", tk.State, tk.Approval)
	}
}

func getWorkType(ctx context.Context, c *client.Client, name string) (*api.WorkType, error) {
	all, err := c.WorkTypes(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].AgentType == envelope.Code && all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, errors.New("no code/" + name + " among the work types")
}

// TestTheBuiltInsDeclareTheirParameters: echo, sleep and system_info come with
// a description and a schema; an agent without a catalogue is listed as
// undeclared, and its work types are not checked.
func TestTheBuiltInsDeclareTheirParameters(t *testing.T) {
	e := newEnv(t, "code-1", "code-old")
	o := e.open()
	e.specAgent("code-1", deploySpec(""))
	old := e.fakeAgent("code-old")
	old.listen()
	old.registerOffering(2, "echo")
	c := e.client(o)
	all, err := c.WorkTypes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, wt := range all {
		names = append(names, wt.Name)
		if wt.Description == "" || wt.Parameters == nil {
			t.Errorf("%s: description %q, parameters %v: want both", wt.Name, wt.Description, wt.Parameters)
		}
	}
	if !slices.Equal(names, []string{"deploy", "echo", "sleep", "system_info"}) {
		t.Fatalf("work types %v", names)
	}
	echo, _ := getWorkType(t.Context(), c, "echo")
	if !slices.Equal(echo.Undeclared, []string{"code-old"}) || len(echo.Variants) != 0 {
		t.Fatalf("echo: undeclared %v variants %v, want code-old undeclared and one variant", echo.Undeclared, echo.Variants)
	}
	if _, err := c.Submit(t.Context(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo",
		Parameters: map[string]any{"message": 7}, Hints: &task.Hints{AgentID: "code-old"}}); err != nil {
		t.Fatalf("pinned to the agent without a catalogue: %v, want it taken", err)
	}
	if _, err := getOne(t, c, "code/nothing"); err == nil {
		t.Fatal("GET /api/v1/work-types/code/nothing answered")
	}
	if wt, err := getOne(t, c, "code/sleep"); err != nil || wt.Name != "sleep" {
		t.Fatalf("GET /api/v1/work-types/code/sleep: %+v %v", wt, err)
	}
}

// getOne reads GET /api/v1/work-types/{path}.
func getOne(t *testing.T, c *client.Client, path string) (*api.WorkType, error) {
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.BaseURL+"/api/v1/work-types/"+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	var wt api.WorkType
	return &wt, json.NewDecoder(resp.Body).Decode(&wt)
}

// TestARegistrationWithABadCatalogueIsRefused: the registration is answered
// 5003 naming the catalogue's field at fault, and the agent is not registered.
func TestARegistrationWithABadCatalogueIsRefused(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	cases := []struct {
		name, field string
		catalog     any
	}{
		{"schema not compiling", "x_custom_fields.work_type_catalog.echo.parameters schema",
			map[string]any{"echo": map[string]any{"parameters": map[string]any{"type": 12}}}},
		{"ref to a file", "x_custom_fields.work_type_catalog.echo.parameters schema",
			map[string]any{"echo": map[string]any{"parameters": map[string]any{"$ref": "file:///etc/passwd"}}}},
		{"work type not offered", "x_custom_fields.work_type_catalog.sleep",
			map[string]any{"sleep": map[string]any{}}},
	}
	for _, tc := range cases {
		reg := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: a.id,
			SupportedVersions: []string{"1.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 1000})
		reg.XCustomFields = map[string]any{worktype.Extension: tc.catalog}
		data, _ := envelope.Encode(reg)
		m := &nats.Msg{Subject: a.subj.Register(a.id), Data: data}
		broker.SetAuth(m, a.token, a.id)
		rep, err := a.nc.RequestMsg(m, wait)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		env, err := envelope.Decode(rep.Data)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := env.Payload.(*envelope.ErrorPayload)
		if !ok || p.ErrorCode != int(errcodes.InvalidMessage) || p.ErrorContext[errcodes.KeyFieldName] != tc.field {
			t.Errorf("%s: answered %s %+v, want 5003 naming %s", tc.name, env.Type, env.Payload, tc.field)
		}
		if strings.Contains(p.ErrorMessage, "root:") {
			t.Errorf("%s: the answer shows a file's content: %s", tc.name, p.ErrorMessage)
		}
	}
	for _, info := range o.Agents() {
		if info.ID == "code-1" && info.State != "unknown" {
			t.Fatalf("code-1 is %s after refused registrations, want unknown", info.State)
		}
	}
}
