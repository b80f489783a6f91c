package orchestrator_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// TestAPIRolesLetAViewerReadOnly: a viewer's token reads tasks, events, output
// and agents, and is refused submits and cancels with 403; an operator's from
// api_tokens may do both; an unknown token gets 401.
func TestAPIRolesLetAViewerReadOnly(t *testing.T) {
	e := newEnv(t, "code-1")
	viewer, operator := broker.NewToken(), broker.NewToken()
	viewerFile := filepath.Join(t.TempDir(), "viewer.token")
	if err := broker.WriteTokenFile(viewerFile, viewer); err != nil {
		t.Fatal(err)
	}
	e.cfg.APITokens = []orchestrator.APITokenConfig{{TokenFile: viewerFile, Role: orchestrator.RoleViewer},
		{Token: operator, Role: orchestrator.RoleOperator}}
	o, a := e.openWithAgent("code-1", 4)
	c := e.client(o)
	task := submit(t, o, nil)
	a.next()
	submitBody := `{"to_agent":"code","work_type":"echo"}`
	cancel := "/api/v1/tasks/" + task.ID + "/cancel"
	for _, path := range []string{"/api/v1/tasks", "/api/v1/tasks/" + task.ID, "/api/v1/agents"} {
		if status, body := call(t, c, "GET", path, viewer, ""); status != 200 {
			t.Errorf("viewer GET %s: %d %s", path, status, body)
		}
	}
	for _, tc := range []struct{ method, path, body string }{{"POST", "/api/v1/tasks", submitBody}, {"POST", cancel, ""}} {
		status, body := call(t, c, tc.method, tc.path, viewer, tc.body)
		if status != 403 || !strings.Contains(body, `"code":"forbidden"`) || strings.Contains(body, viewer) {
			t.Errorf("viewer %s %s: %d %s, want 403 forbidden", tc.method, tc.path, status, body)
		}
	}
	if got, _ := o.Task(task.ID); got.State.Final() || got.CancelRequested {
		t.Fatalf("a viewer's cancel reached the task: %+v", got)
	}
	if status, body := call(t, c, "POST", "/api/v1/tasks", operator, submitBody); status != 201 {
		t.Errorf("operator submit: %d %s", status, body)
	}
	if status, body := call(t, c, "POST", cancel, operator, ""); status != 202 {
		t.Errorf("operator cancel: %d %s", status, body)
	}
	if status, _ := call(t, c, "GET", "/api/v1/tasks", "not-"+viewer, ""); status != 401 {
		t.Errorf("unknown token: %d, want 401", status)
	}
}

// TestAPITokensConfigIsChecked: a role must be viewer or operator, a token must
// be given, and no token may serve two roles.
func TestAPITokensConfigIsChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		tokens []orchestrator.APITokenConfig
		want   string
	}{
		"bad role":    {[]orchestrator.APITokenConfig{{Token: "t", Role: "admin"}}, "api_tokens[0].role"},
		"no token":    {[]orchestrator.APITokenConfig{{Role: orchestrator.RoleViewer}}, "api_tokens[0].token_file"},
		"same token":  {[]orchestrator.APITokenConfig{{Token: "abc", Role: orchestrator.RoleViewer}, {Token: "abc", Role: orchestrator.RoleOperator}}, "api_tokens[1]"},
		"api's token": {[]orchestrator.APITokenConfig{{Token: "api", Role: orchestrator.RoleViewer}}, "api_tokens[0]"},
	} {
		e := newEnv(t)
		e.cfg.APIToken = "api"
		e.cfg.APITokens = tc.tokens
		o, err := orchestrator.Open(e.cfg, orchestrator.Options{})
		if err == nil {
			o.Close()
			t.Errorf("%s: opened", name)
		} else if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: %v, want an error naming %s and no token", name, err, tc.want)
		}
	}
}

// TestAPIListFiltersAndPages: the task list keeps the tasks of an agent and of a
// work type, and pages with offset and limit, newest first.
func TestAPIListFiltersAndPages(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	a.registerOffering(4, "echo", "sleep")
	c := e.client(o)
	var ids []string
	for _, wt := range []string{"echo", "sleep", "echo"} {
		task, err := o.Submit(t.Context(), api.SubmitRequest{ToAgent: "code", WorkType: wt})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
		a.next()
	}
	list := func(name string, opts api.ListOptions) []string {
		t.Helper()
		tasks, err := c.List(t.Context(), opts)
		if err != nil {
			t.Fatalf("list %s: %v", name, err)
		}
		var got []string
		for _, tk := range tasks {
			got = append(got, tk.ID)
		}
		return got
	}
	for _, tc := range []struct {
		name string
		opts api.ListOptions
		want []string
	}{
		{"work type", api.ListOptions{WorkType: "sleep"}, []string{ids[1]}},
		{"agent", api.ListOptions{AgentID: "code-1"}, []string{ids[2], ids[1], ids[0]}},
		{"another agent", api.ListOptions{AgentID: "code-2"}, nil},
		{"first page", api.ListOptions{Limit: 2}, []string{ids[2], ids[1]}},
		{"second page", api.ListOptions{Limit: 2, Offset: 2}, []string{ids[0]}},
		{"past the end", api.ListOptions{Offset: 3}, nil},
		{"work type, second page", api.ListOptions{WorkType: "echo", Limit: 1, Offset: 1}, []string{ids[0]}},
	} {
		if got := list(tc.name, tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if status, _ := call(t, c, "GET", "/api/v1/tasks?offset=-1", e.cfg.APIToken, ""); status != 400 {
		t.Errorf("negative offset: %d, want 400", status)
	}
}
