package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/worktype"
)

// testCatalogue is a catalogue of three work types: infra/patch (typed, asked
// approval by one agent, one agent undeclared, two variants), infra/reboot
// (required approval) and code/build (no schema).
func testCatalogue() []api.WorkType {
	return []api.WorkType{
		{AgentType: "code", Name: "build", Spec: worktype.Spec{Description: "Builds a repo.\nWith make."},
			Agents: []string{"code-1"}},
		{AgentType: "infra", Name: "patch",
			Spec:           worktype.Spec{Description: "Patches hosts, a few at a time.\nReboots when the kernel changed.", Parameters: patchSchema},
			ApprovalAgents: []string{"nas-2"}, Agents: []string{"nas-1", "nas-2", "nas-3", "pi-1", "pi-2", "pi-3", "pi-4"},
			Undeclared: []string{"pi-4"},
			Variants: []api.WorkTypeVariant{
				{Spec: worktype.Spec{Description: "Patches hosts, a few at a time.", Parameters: patchSchema}, Agents: []string{"nas-1", "nas-2"}},
				{Spec: worktype.Spec{Description: "Old patch.", Parameters: closedSchema, Approval: "required"}, Agents: []string{"nas-3"}},
			}},
		{AgentType: "infra", Name: "reboot", Spec: worktype.Spec{Description: "Reboots \x1b[2Ja host.",
			Parameters: map[string]any{"type": "object", "additionalProperties": false}, Approval: "required"},
			Agents: []string{"nas-1"}},
	}
}

func TestWorkTypesListsAndDescribes(t *testing.T) {
	clearClientEnv(t)
	cases := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"every work type", nil, []string{
			"TYPE   NAME    APPROVAL  AGENTS                          DESCRIPTION\n",
			"code   build   -         code-1                          Builds a repo.\n",
			"infra  patch   by nas-2  nas-1,nas-2,nas-3,pi-1,pi-2 +2  Patches hosts, a few at a time.\n",
			"infra  reboot  required  nas-1                           Reboots  [2Ja host.\n"},
			[]string{"With make.", "\x1b"}},
		{"of one agent type", []string{"infra"}, []string{"infra  patch", "infra  reboot"}, []string{"code"}},
		{"one, described", []string{"infra/patch"}, []string{
			"Work type:    infra/patch",
			"Description:  Patches hosts, a few at a time.",
			"              Reboots when the kernel changed.",
			"Approval:     asked by nas-2: a task pinned to one (--hint agent_id) waits for an operator's yes; an unpinned one is not sent to them",
			"Agents:       nas-1, nas-2, nas-3, pi-1, pi-2, pi-3, pi-4",
			"Undeclared:   pi-4 (sent no catalogue",
			"Parameters (other names allowed):",
			"  NAME   TYPE              REQUIRED  VALUES         DEFAULT  DESCRIPTION",
			"  n      integer           yes       -              -        how many hosts at once",
			"  dry    boolean           no        -              false    -",
			"  level  string            no        \"low\", \"high\"  -        -",
			"  ports  array of integer  no",
			"Variants (the agents declare different specs; a task must satisfy each):",
			"  Declared by nas-3:",
			"    Description:  Old patch.",
			"    Approval:     required",
			"    Parameters (other names refused):",
			"      NAME  TYPE     REQUIRED",
			"      n     integer  no"}, nil},
		{"one without a schema", []string{"code/build"}, []string{"Approval:     not needed",
			"Parameters: not declared: the agents take any"}, []string{"Variants"}},
		{"one without parameters", []string{"infra/reboot"}, []string{"Approval:     required: every task waits",
			"Description:  Reboots  [2Ja host.", "Parameters: none (other names refused)"}, []string{"\x1b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, server := catalogueAPI(t, testCatalogue(), nil)
			code, out, errOut := runCLI(t, "", append(append([]string{"worktypes"}, tc.args...), server...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestWorkTypesJSON(t *testing.T) {
	clearClientEnv(t)
	_, server := catalogueAPI(t, testCatalogue(), nil)
	code, out, errOut := runCLI(t, "", append([]string{"worktypes", "infra", "--json"}, server...)...)
	var list []api.WorkType
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].Name != "patch" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", append([]string{"worktypes", "infra/reboot", "--json"}, server...)...)
	var one api.WorkType
	if code != 0 || json.Unmarshal([]byte(out), &one) != nil || one.Name != "reboot" || one.Approval != "required" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestWorkTypesSaysWhatIsMissing(t *testing.T) {
	clearClientEnv(t)
	cases := []struct {
		name string
		list []api.WorkType
		arg  string
		exit int
		want string
	}{
		{"an unknown work type", testCatalogue(), "infra/pach", 1, "no work type infra/pach: agents of type infra offer patch, reboot"},
		{"an unknown agent type", testCatalogue(), "infr", 1, `no agent of type "infr" offers a work type`},
		{"an older orchestrator", nil, "", 1, "serves no work-type catalogue (HTTP 404)"},
		{"a bad argument", testCatalogue(), "infra/", 2, `"infra/": want TYPE or TYPE/WORK_TYPE`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, server := catalogueAPI(t, tc.list, nil)
			args := []string{"worktypes"}
			if tc.arg != "" {
				args = append(args, tc.arg)
			}
			code, _, errOut := runCLI(t, "", append(args, server...)...)
			if code != tc.exit || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut, tc.exit, tc.want)
			}
		})
	}
}

func TestCompactList(t *testing.T) {
	cases := []struct {
		items []string
		width int
		want  string
	}{
		{nil, 10, ""},
		{[]string{"echo", "sleep"}, 10, "echo,sleep"},
		{[]string{"echo", "sleep", "system_info"}, 16, "echo,sleep +1"},
		{[]string{"run_a_very_long_playbook", "b"}, 10, "run_a_very_long_playbook +1"},
	}
	for _, tc := range cases {
		if got := compactList(tc.items, tc.width); got != tc.want {
			t.Errorf("compactList(%q, %d) = %q, want %q", tc.items, tc.width, got, tc.want)
		}
	}
}

func TestAgentsShowsWorkTypes(t *testing.T) {
	clearClientEnv(t)
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agents":
			writeAPIJSON(w, http.StatusOK, []api.AgentInfo{
				{ID: "code-1", Type: "code", State: "online", Breaker: "closed", WorkTypes: []string{"echo", "sleep", "system_info"}},
				{ID: "infra-1", Type: "infra", State: "online", Breaker: "closed",
					WorkTypes: []string{"echo", "sleep", "system_info", "run_playbook", "patch", "reboot"}},
				{ID: "bare", Type: "code", State: "offline", Breaker: "closed"}})
		default:
			writeAPIJSON(w, http.StatusOK, map[string]any{"status": "ready"})
		}
	}))
	code, out, errOut := runCLI(t, "", append([]string{"agents"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"WORK TYPES", "echo,sleep,system_info ", "echo,sleep,system_info +3 ", "bare "} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestTaskShowsTheWorkTypeDescription(t *testing.T) {
	clearClientEnv(t)
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	for _, tc := range []struct {
		name string
		list []api.WorkType
		want string
	}{
		{"described", testCatalogue(), "Description:  Patches hosts, a few at a time.\n              Reboots when the kernel changed.\n"},
		{"an older orchestrator", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/api/v1/tasks/t1":
					writeAPIJSON(w, http.StatusOK, &task.Task{ID: "t1", State: task.StatePending, ToAgent: envelope.Infra,
						WorkType: "patch", CreatedAt: at, UpdatedAt: at})
				case "/api/v1/tasks/t1/history":
					writeAPIJSON(w, http.StatusOK, []task.Event{})
				case "/api/v1/work-types":
					if tc.list != nil {
						writeAPIJSON(w, http.StatusOK, tc.list)
						return
					}
					fallthrough
				default:
					writeAPIError(w, http.StatusNotFound, "not_found", "", "no route")
				}
			}))
			code, out, errOut := runCLI(t, "", append([]string{"task", "t1"}, server...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if tc.want != "" && !strings.Contains(out, tc.want) || tc.want == "" && strings.Contains(out, "Description") {
				t.Fatalf("output, want description %q:\n%s", tc.want, out)
			}
		})
	}
}
