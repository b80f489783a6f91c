package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
)

// showWorkTypes are the work types of the agents of TestWorkTypesAcrossProcesses,
// beside the cluster's count and hang: show records its request_id in the runs
// file and prints the parameters it got on stdin; gated asks for approval.
const showWorkTypes = `  show:
    description: |
      Prints its parameters.
      As the JSON it reads on stdin.
    shell: |
      echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
      cat
    env: [PATH]
    set_env: {RUNS_FILE: %s}
    schema:
      type: object
      required: [n]
      additionalProperties: false
      properties:
        n: {type: integer, minimum: 1, description: how many times}
        level: {type: string, enum: [low, high]}
        ports: {type: array, items: {type: integer}}
        dry: {type: boolean}
  gated:
    description: Waits for a yes.
    command: ["true"]
    approval: required
`

// TestWorkTypesAcrossProcesses: an agent's config describes its work types; the
// orchestrator refuses at the door (422, nothing stored, nothing run) what their
// schema refuses, and the CLI exits 65 naming the value; --param n=2 reaches the
// process as the integer 2; chiffon worktypes, agents and task show the catalogue.
func TestWorkTypesAcrossProcesses(t *testing.T) {
	c := newCluster(t, 1)
	c.extraWorkTypes = strings.Replace(showWorkTypes, "%s", c.runsFile, 1)
	c.writeAgentConfig("code-1")
	c.start()
	cli := func(args ...string) result {
		t.Helper()
		return chiffonBinary(t, c.bin, append(args, "--server", "http://"+c.httpAddr, "--api-token-file", c.secret("api.token"))...)
	}
	submit := []string{"submit", "--to", "code", "--work-type", "show"}

	t.Run("a wrong type or a missing parameter is refused at the door", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			params map[string]any
			want   string // in the 422's message or pointer
		}{
			{"wrong type", map[string]any{"n": "two"}, "/n"},
			{"missing required", map[string]any{"level": "low"}, "n"},
			{"below the minimum", map[string]any{"n": 0}, "/n"},
		} {
			code, body := postTask(t, c, api.SubmitRequest{ToAgent: "code", WorkType: "show", Parameters: tc.params})
			if code != http.StatusUnprocessableEntity || body.Code != "invalid_parameter" || body.Field != "parameters" ||
				!strings.Contains(body.Pointer+" "+body.Message, tc.want) {
				t.Errorf("%s: POST /api/v1/tasks answered %d %+v, want 422 invalid_parameter naming %s", tc.name, code, body, tc.want)
			}
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{append(submit, "--param", `n:="two"`), "parameter /n: got string, want integer (HTTP 422)"},
			{append(submit, "--param", `n:="two"`, "--all"), "parameter /n: got string, want integer (HTTP 422)"},
			{append(submit, "--param", "level=low"), "parameters: missing property 'n' (HTTP 422)"},
			{[]string{"schedule", "add", "nightly", "--cron", "@daily", "--to", "code", "--work-type", "show", "--param", `n:="two"`},
				"parameter /n: got string, want integer (HTTP 422)"},
		} {
			got := cli(tc.args...)
			t.Logf("chiffon %s: exit %d: %s", strings.Join(tc.args, " "), got.code, strings.TrimSpace(got.stderr))
			if got.code != 65 || got.stderr != "chiffon: "+tc.want+"\n" {
				t.Errorf("chiffon %s: exit %d, stderr %q; want 65, %q", strings.Join(tc.args, " "), got.code, got.stderr, tc.want)
			}
		}
		if got := cli(append(submit, "--param", "n=two")...); got.code != 65 ||
			got.stderr != "chiffon: parameter /n: want an integer, got \"two\"\n" {
			t.Errorf("submit --param n=two: exit %d, stderr %q", got.code, got.stderr)
		}
		if got := cli("submit", "--to", "code", "--work-type", "nosuch", "--param", "n:=1"); got.code != 65 ||
			!strings.Contains(got.stderr, "work_type") {
			t.Errorf("submit of an unknown work type: exit %d, stderr %q", got.code, got.stderr)
		}
		assertNothingStored(t, c)
	})

	t.Run("an enum violation names the allowed values", func(t *testing.T) {
		got := cli(append(submit, "--param", "n=1", "--param", "level=mid")...)
		if got.code != 65 || !strings.Contains(got.stderr, `must be one of "low", "high", got "mid"`) {
			t.Errorf("--param level=mid: exit %d, stderr %q", got.code, got.stderr)
		}
		got = cli(append(submit, "--param", "n=1", "--param", `level:="mid"`)...)
		if got.code != 65 || !strings.Contains(got.stderr, "parameter /level") ||
			!strings.Contains(got.stderr, "low") || !strings.Contains(got.stderr, "high") {
			t.Errorf("--param level:='\"mid\"': exit %d, stderr %q", got.code, got.stderr)
		}
		assertNothingStored(t, c)
	})

	t.Run("typed parameters reach the process", func(t *testing.T) {
		got := cli(append(submit, "--param", "n=2", "--param", "ports=80,443", "--param", "dry=true", "--param", "level=high", "--wait")...)
		if got.code != 0 {
			t.Fatalf("submit --wait: exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
		var params map[string]any
		if err := json.Unmarshal(bytes.TrimSpace([]byte(got.stdout)), &params); err != nil {
			t.Fatalf("the process printed %q, not its parameters: %v", got.stdout, err)
		}
		want := map[string]any{"n": 2.0, "ports": []any{80.0, 443.0}, "dry": true, "level": "high"}
		if !jsonEqualValues(params, want) || !strings.Contains(got.stdout, `"n":2`) {
			t.Fatalf("the process got %s, want %v", got.stdout, want)
		}
		tasks, err := c.client.List(fleetCtx(t), api.ListOptions{})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("%d tasks (%v), want 1", len(tasks), err)
		}
		if runs := c.runs(); len(runs) != 1 || runs[tasks[0].RequestID] != 1 {
			t.Fatalf("the ledger %v, want %s once", runs, tasks[0].RequestID)
		}
		shown := cli("task", tasks[0].ID)
		if !strings.Contains(shown.stdout, "Description:  Prints its parameters.\n") {
			t.Errorf("chiffon task shows no description:\n%s", shown.stdout)
		}
	})

	t.Run("chiffon worktypes shows the config's work types", func(t *testing.T) {
		list := cli("worktypes")
		for _, want := range []string{"TYPE", "code  show", "Prints its parameters.", "code-1"} {
			if list.code != 0 || !strings.Contains(list.stdout, want) {
				t.Errorf("chiffon worktypes lacks %q: exit %d\n%s%s", want, list.code, list.stdout, list.stderr)
			}
		}
		// gated's agent asks for approval: the orchestrator says so as the
		// work type's approval or as the agents asking.
		if gated := lineWith(list.stdout, "code  gated"); !strings.Contains(gated, "required") && !strings.Contains(gated, "by code-1") {
			t.Errorf("chiffon worktypes shows no approval for gated: %q", gated)
		}
		one := cli("worktypes", "code/show")
		for _, want := range []string{"Work type:    code/show", "Description:  Prints its parameters.",
			"As the JSON it reads on stdin.", "Agents:       code-1", "Parameters (other names refused):",
			"n      integer           yes       -", "how many times", `level  string            no        "low", "high"`,
			"ports  array of integer"} {
			if one.code != 0 || !strings.Contains(one.stdout, want) {
				t.Errorf("chiffon worktypes code/show lacks %q: exit %d\n%s%s", want, one.code, one.stdout, one.stderr)
			}
		}
		if agents := cli("agents"); !strings.Contains(agents.stdout, "WORK TYPES") || !strings.Contains(agents.stdout, "count,") {
			t.Errorf("chiffon agents shows no work types:\n%s", agents.stdout)
		}
		t.Logf("chiffon worktypes:\n%s\nchiffon worktypes code/show:\n%s", list.stdout, one.stdout)
	})
}

// postTask submits req through the API and returns the status and error.
func postTask(t *testing.T, c *cluster, req api.SubmitRequest) (int, api.APIErrorDetail) {
	t.Helper()
	b, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(fleetCtx(t), http.MethodPost, "http://"+c.httpAddr+"/api/v1/tasks", bytes.NewReader(b))
	hr.Header.Set("Authorization", "Bearer "+c.tokens["api.token"])
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error
}

// assertNothingStored fails t when the orchestrator holds a task, a batch or a
// schedule, or when the agent ran anything.
func assertNothingStored(t *testing.T, c *cluster) {
	t.Helper()
	ctx := fleetCtx(t)
	tasks, err := c.client.List(ctx, api.ListOptions{})
	if err != nil || len(tasks) != 0 {
		t.Errorf("%d tasks stored (%v), want none", len(tasks), err)
	}
	batches, err := c.client.Batches(ctx, 10)
	if err != nil || len(batches) != 0 {
		t.Errorf("%d batches stored (%v), want none", len(batches), err)
	}
	schedules, err := c.client.Schedules(ctx)
	if err != nil || len(schedules) != 0 {
		t.Errorf("%d schedules stored (%v), want none", len(schedules), err)
	}
	if runs := c.runs(); len(runs) != 0 {
		t.Errorf("the agent ran %v, want nothing", runs)
	}
}

// lineWith is the first line of text holding s, or "".
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// jsonEqualValues reports whether a and b are the same JSON values.
func jsonEqualValues(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
