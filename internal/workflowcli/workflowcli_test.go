package workflowcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/internal/workflowcli"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
	"go.uber.org/goleak"
)

// The commands against a whole Chiffon in this process (internal/stack): a
// broker, an orchestrator with a workflow in its config, and an agent code-1
// whose work types are ok ({"n": 2} as structured output), fail (exit 3)
// and wait (until cancelled).

// api is the stack every test uses; each uses workflows of its own.
var (
	apiURL, apiToken string
	orch             *orchestrator.Orchestrator
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		s, err := stack.Start(context.Background(), stack.Config{
			Orchestrator: orchestrator.Config{Workflows: orchestrator.WorkflowsConfig{{Name: "from-config",
				Steps: []api.WorkflowStep{{Name: "one", Task: &api.SubmitRequest{ToAgent: "code", WorkType: "ok"}}}}}},
			Agents: []stack.Agent{{Config: agent.Config{ID: "code-1", Type: "code", MaxConcurrency: 8}, Handlers: handlers}},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		apiURL, apiToken, orch = s.APIURL(), s.APIToken(), s.Orchestrator()
		code := m.Run()
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
			goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return code
	}())
}

var handlers = map[string]agent.Handler{
	"ok": func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		return agent.Result{Structured: map[string]any{"n": 2}}, nil
	},
	"fail": func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		return agent.Result{ExitCode: 3, Output: "boom"}, nil
	},
	"wait": func(ctx context.Context, _ *agent.Request, _ agent.Progress) (agent.Result, error) {
		<-ctx.Done()
		return agent.Result{}, ctx.Err()
	},
}

// exitErr is the test's exit: Config.Exit's error.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return fmt.Sprint(e.err) }

// usageErr is Config.Usage's error.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

// explained is Config.Explain's error.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// testConfig is a Config as package main gives it, with the exit codes it
// uses, against the stack's API.
func testConfig() workflowcli.Config {
	return workflowcli.Config{
		ClientFlags: func(cmd *cobra.Command) (func() (*client.Client, error), func() bool) {
			jsonOut := cmd.Flags().Bool("json", false, "print JSON")
			return func() (*client.Client, error) { return &client.Client{BaseURL: apiURL, Token: apiToken}, nil },
				func() bool { return *jsonOut }
		},
		ParseParam: func(kv string) (string, any, bool, error) {
			if k, raw, ok := strings.Cut(kv, ":="); ok {
				var v any
				return k, v, false, json.Unmarshal([]byte(raw), &v)
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return "", nil, false, fmt.Errorf("%q: want key=value or key:=JSON", kv)
			}
			return k, v, true, nil
		},
		PrintJSON: func(w io.Writer, v any) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
		Usage:   func(msg string) error { return &usageErr{msg} },
		Explain: func(msg string, err error) error { return &explained{msg, err} },
		Exit:    func(code int, err error) error { return &exitErr{code, err} },
		TaskExitCode: func(t *task.Task) int {
			if t.Result != nil && t.Result.ExitCode > 0 {
				return int(t.Result.ExitCode)
			}
			return 1
		},
		Codes: workflowcli.ExitCodes{Cancelled: 130, NotFinished: 75, ParamError: 65},
	}
}

// result is what a command did.
type result struct {
	code           int
	stdout, stderr string
	err            error
}

// cli runs `chiffon workflow args...` in ctx and returns its exit code as
// package main would: Exit's, 2 for a usage error, 1 for another.
func cli(ctx context.Context, args ...string) result {
	cmd := workflowcli.Command(testConfig())
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	r := result{stdout: out.String(), stderr: errOut.String(), err: err}
	var ee *exitErr
	var ue *usageErr
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.code
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "accepts "), strings.HasPrefix(err.Error(), "unknown flag"):
		r.code = 2
	default:
		r.code = 1
	}
	return r
}

// run is cli with a deadline, failing t unless it exits want.
func run(t *testing.T, want int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := cli(ctx, args...)
	if r.code != want {
		t.Fatalf("workflow %s: exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.err, want, r.stdout, r.stderr)
	}
	return r
}

// apply stores spec (YAML) through `workflow apply`.
func apply(t *testing.T, spec string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, 0, "apply", file)
}

// waitRun waits until run id satisfies cond.
func waitRun(t *testing.T, id string, what string, cond func(*api.WorkflowRun) bool) *api.WorkflowRun {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := orch.GetRun(id)
		if err == nil && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: timed out waiting for %s: %+v %v", id, what, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gateWaits reports whether step name of r is a gate awaiting approval.
func gateWaits(name string) func(*api.WorkflowRun) bool {
	return func(r *api.WorkflowRun) bool {
		s := r.Step(name)
		return s != nil && s.Approval != nil && s.Approval.State == task.ApprovalWaiting
	}
}

// stepLine matches a line --wait prints for a step.
var stepLine = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d step (\S+) (running|succeeded|failed|skipped)(: .*)?$`)

// steps lists the step lines of out as "NAME STATE".
func steps(out string) []string {
	var got []string
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	return got
}

// TestApplyShowListDelete: a workflow file is stored, listed beside the
// config's, shown as YAML that apply reads back to the same spec, and
// deleted; a spec the orchestrator refuses names its field, a file with an
// unknown key is a usage error, a config workflow is not the API's to change.
func TestApplyShowListDelete(t *testing.T) {
	apply(t, `name: defs
description: two steps
params:
  n: {type: integer, default: 1}
steps:
  - name: first
    task: {to_agent: code, work_type: ok, parameters: {n: "${params.n}"}}
  - name: second
    needs: [{step: first}]
    approval: {note: "go?"}
`)
	out := run(t, 0, "list").stdout
	if !regexp.MustCompile(`(?m)^defs\s+api\s+2\s+1\s+two steps$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^from-config\s+config\s+1\s+-\s+-$`).MatchString(out) {
		t.Fatalf("workflow list:\n%s", out)
	}
	shown := run(t, 0, "show", "defs").stdout
	if !strings.HasPrefix(shown, "# workflow defs, from the API, stored ") || !strings.Contains(shown, "\nname: defs\n") {
		t.Fatalf("workflow show:\n%s", shown)
	}
	before, err := orch.GetWorkflow("defs")
	if err != nil {
		t.Fatal(err)
	}
	apply(t, shown)
	after, err := orch.GetWorkflow("defs")
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(before.WorkflowSpec)
	b2, _ := json.Marshal(after.WorkflowSpec)
	if string(b1) != string(b2) {
		t.Fatalf("show then apply changed the spec:\n%s\n%s", b1, b2)
	}
	var w api.Workflow
	if r := run(t, 0, "show", "defs", "--json"); json.Unmarshal([]byte(r.stdout), &w) != nil || w.Source != api.WorkflowFromAPI {
		t.Fatalf("show --json: %s", r.stdout)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("name: bad\nsteps:\n  - {name: a, needs: [{step: z}], approval: {}}\n"), 0o600)
	if r := run(t, 1, "apply", bad); !strings.Contains(r.err.Error(), "steps[0].needs[0].step") {
		t.Fatalf("apply of a bad spec: %v", r.err)
	}
	_ = os.WriteFile(bad, []byte("name: bad\nstepz: []\n"), 0o600)
	if r := run(t, 2, "apply", bad); !strings.Contains(r.err.Error(), "stepz") {
		t.Fatalf("apply of an unknown key: %v", r.err)
	}
	if r := run(t, 1, "delete", "from-config"); r.err.Error() != "workflow from-config is defined in the orchestrator's config: change it there (HTTP 409)" {
		t.Fatalf("delete of a config workflow: %v", r.err)
	}
	if r := run(t, 0, "delete", "defs"); r.stdout != "workflow defs deleted; its runs stay\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
	if r := run(t, 1, "show", "defs"); !strings.Contains(r.err.Error(), `no workflow named "defs"`) {
		t.Fatalf("show of a deleted workflow: %v", r.err)
	}
}

// TestRunWaitFollowsTheRunToSuccess: `run --wait` prints the run's id, a line
// per step as it goes, the run's end, and exits 0; --param k=v is typed by
// the workflow's declared type.
func TestRunWaitFollowsTheRunToSuccess(t *testing.T) {
	apply(t, `name: pipeline
params: {count: {type: integer, required: true}, label: {}}
steps:
  - {name: first, task: {to_agent: code, work_type: ok, parameters: {count: "${params.count}"}}}
  - {name: second, needs: [{step: first}], task: {to_agent: code, work_type: ok, parameters: {n: "${steps.first.output.n}"}}}
`)
	r := run(t, 0, "run", "pipeline", "--param", "count=5", "--param", "label=x", "--wait")
	// A step seen running, or only once it ended, shows so.
	var ended []string
	for _, line := range steps(r.stdout) {
		if !strings.HasSuffix(line, " running") {
			ended = append(ended, line)
		}
	}
	if strings.Join(ended, ",") != "first succeeded,second succeeded" {
		t.Fatalf("step lines %v:\n%s", ended, r.stdout)
	}
	id := regexp.MustCompile(`run (\S+) of workflow pipeline started`).FindStringSubmatch(r.stderr)
	if id == nil || !strings.Contains(r.stdout, "run "+id[1]+" succeeded\n") {
		t.Fatalf("--wait names no run, or not its end:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	got, err := orch.GetRun(id[1])
	if err != nil || got.Params["count"] != float64(5) || got.Params["label"] != "x" {
		t.Fatalf("the run's parameters: %v %v", got.Params, err)
	}
}

// TestRunWaitOfAFailedRunExitsAsItsFailedTask: the failed step's task exits
// 3, so does the CLI; the step after it is shown skipped.
func TestRunWaitOfAFailedRunExitsAsItsFailedTask(t *testing.T) {
	apply(t, `name: failing
steps:
  - {name: check, task: {to_agent: code, work_type: fail}}
  - {name: deploy, needs: [{step: check}], task: {to_agent: code, work_type: ok}}
  - {name: notify, needs: [{step: check, when: failure}], task: {to_agent: code, work_type: ok}}
`)
	r := run(t, 3, "run", "failing", "--wait")
	for _, want := range []string{"check failed", "deploy skipped", "notify succeeded"} {
		if !strings.Contains(strings.Join(steps(r.stdout), ","), want) {
			t.Fatalf("no %q among the step lines:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m) step check failed: .+$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m) step deploy skipped: .+$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m) run \S+ failed`).MatchString(r.stdout) {
		t.Fatalf("the lines say no why:\n%s", r.stdout)
	}
}

// TestRunRefusesParamsAndStartsNothing: a value the declared type refuses,
// an undeclared name or a required one left out exit 65 and start no run; a
// malformed pair is a usage error.
func TestRunRefusesParamsAndStartsNothing(t *testing.T) {
	apply(t, `name: typed
params: {count: {type: integer, required: true}}
steps: [{name: a, approval: {}}]
`)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--param", "count=many"}, 65, "--param count"},
		{[]string{"--param", "count:=1.5"}, 65, "--param count"},
		{[]string{"--param", "count=1", "--param", "other=2"}, 65, "--param other"},
		{nil, 65, "--param count: is required"},
		{[]string{"--param", "count"}, 2, "--param"},
	} {
		r := run(t, tc.code, append([]string{"run", "typed"}, tc.args...)...)
		if !strings.Contains(r.err.Error(), tc.want) {
			t.Fatalf("run typed %v: %v, want %q", tc.args, r.err, tc.want)
		}
	}
	if runs, err := orch.Runs("typed", 0); err != nil || len(runs) != 0 {
		t.Fatalf("refused runs were started: %d %v", len(runs), err)
	}
	if r := run(t, 1, "run", "nope"); !strings.Contains(r.err.Error(), `no workflow named "nope"`) {
		t.Fatalf("run of an unknown workflow: %v", r.err)
	}
}

// TestAGateIsAnsweredAndARunShown: `run` prints the id alone; `run ID` shows
// the run with the command that approves its gate; approve answers it (a
// step that is none, or no gate waiting, is refused) and `run ID --wait`
// follows it to its end; a rejected gate fails its run (exit 1: no task
// failed); a second run past max_runs is refused.
func TestAGateIsAnsweredAndARunShown(t *testing.T) {
	apply(t, `name: gated
max_runs: 1
steps:
  - {name: gate, approval: {note: window}}
  - {name: work, needs: [{step: gate}], task: {to_agent: code, work_type: ok}}
`)
	id := strings.TrimSpace(run(t, 0, "run", "gated").stdout)
	waitRun(t, id, "its gate to wait", gateWaits("gate"))
	if r := run(t, 1, "run", "gated"); !strings.Contains(r.err.Error(), "max_runs (1)") {
		t.Fatalf("a second run: %v", r.err)
	}
	shown := run(t, 0, "run", id).stdout
	if !strings.Contains(shown, "chiffon workflow approve "+id+" gate") || !regexp.MustCompile(`(?m)^work\s+pending\s`).MatchString(shown) {
		t.Fatalf("run ID:\n%s", shown)
	}
	if r := run(t, 1, "approve", id, "nope"); !strings.Contains(r.err.Error(), `has no step "nope"`) {
		t.Fatalf("approve of no step: %v", r.err)
	}
	if r := run(t, 1, "approve", id, "work"); !strings.Contains(r.err.Error(), "not a gate awaiting approval") {
		t.Fatalf("approve of a task step: %v", r.err)
	}
	if r := run(t, 0, "approve", id, "gate", "--note", "ok"); r.stdout != "step gate of run "+id+" approved\n" {
		t.Fatalf("approve: %q", r.stdout)
	}
	r := run(t, 0, "run", id, "--wait")
	if !strings.Contains(r.stdout, "run "+id+" succeeded") {
		t.Fatalf("run ID --wait:\n%s", r.stdout)
	}
	if a := waitRun(t, id, "its end", func(r *api.WorkflowRun) bool { return r.State.Final() }).Step("gate").Approval; a.Note != "ok" {
		t.Fatalf("the gate's approval: %+v", a)
	}

	id = strings.TrimSpace(run(t, 0, "run", "gated").stdout)
	waitRun(t, id, "its gate to wait", gateWaits("gate"))
	run(t, 0, "reject", id, "gate")
	if r := run(t, 1, "run", id, "--wait"); !strings.Contains(r.stdout, "run "+id+" failed") {
		t.Fatalf("a rejected run, --wait:\n%s", r.stdout)
	}
}

// TestCancelEndsAFollowedRunWith130: a run followed with --wait ends
// cancelled once `cancel` asks it to; --wait exits 130; a second cancel is
// refused.
func TestCancelEndsAFollowedRunWith130(t *testing.T) {
	apply(t, `name: long
steps:
  - {name: hold, task: {to_agent: code, work_type: wait}}
  - {name: after, needs: [{step: hold}], task: {to_agent: code, work_type: ok}}
`)
	id := strings.TrimSpace(run(t, 0, "run", "long").stdout)
	waitRun(t, id, "hold to run", func(r *api.WorkflowRun) bool { return r.Step("hold").State == api.StepRunning })
	var wg sync.WaitGroup
	var followed result
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		followed = cli(ctx, "run", id, "--wait")
	}()
	if r := run(t, 0, "cancel", id); !strings.Contains(r.stdout, "cancel asked") {
		t.Fatalf("cancel: %q", r.stdout)
	}
	wg.Wait()
	if followed.code != 130 || !strings.Contains(followed.stdout, "run "+id+" cancelled") ||
		!strings.Contains(strings.Join(steps(followed.stdout), ","), "after skipped") {
		t.Fatalf("--wait of a cancelled run: exit %d (%v)\n%s", followed.code, followed.err, followed.stdout)
	}
	if r := run(t, 1, "cancel", id); !strings.Contains(r.err.Error(), "already ended") {
		t.Fatalf("cancel again: %v", r.err)
	}
	if r := run(t, 1, "cancel", "00000000-0000-4000-8000-000000000000"); !strings.Contains(r.err.Error(), "no workflow run") {
		t.Fatalf("cancel of no run: %v", r.err)
	}
}

// TestWaitStoppedExits75: a --wait whose context ends before the run's end
// exits 75, and says how to follow it again.
func TestWaitStoppedExits75(t *testing.T) {
	apply(t, `name: stopped
steps: [{name: gate, approval: {}}]
`)
	id := strings.TrimSpace(run(t, 0, "run", "stopped").stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r := cli(ctx, "run", id, "--wait")
	if r.code != 75 || !strings.Contains(r.err.Error(), "chiffon workflow run "+id+" --wait") {
		t.Fatalf("a stopped wait: exit %d %v", r.code, r.err)
	}
	run(t, 0, "cancel", id)
	waitRun(t, id, "its end", func(r *api.WorkflowRun) bool { return r.State.Final() })
}

// TestRunsListsNewestFirst: the table of runs, of one workflow or all, with
// the steps ended out of all; --json the runs.
func TestRunsListsNewestFirst(t *testing.T) {
	apply(t, `name: listed
max_runs: 2
steps: [{name: a, task: {to_agent: code, work_type: ok}}, {name: b, needs: [{step: a}], approval: {}}]
`)
	first := strings.TrimSpace(run(t, 0, "run", "listed").stdout)
	waitRun(t, first, "b to wait", gateWaits("b"))
	second := strings.TrimSpace(run(t, 0, "run", "listed").stdout)
	waitRun(t, second, "b to wait", gateWaits("b"))
	out := run(t, 0, "runs", "listed", "--limit", "2").stdout
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+WORKFLOW\s+STATE\s+STEPS\s+CREATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+second+`\s+listed\s+running\s+1/2\s`).MatchString(lines[1]) ||
		!strings.HasPrefix(lines[2], first) {
		t.Fatalf("runs listed:\n%s", out)
	}
	var runs []api.WorkflowRun
	if r := run(t, 0, "runs", "--json", "--limit", "1"); json.Unmarshal([]byte(r.stdout), &runs) != nil || len(runs) != 1 || runs[0].ID != second {
		t.Fatalf("runs --json --limit 1: %s", r.stdout)
	}
	for _, id := range []string{first, second} {
		run(t, 0, "cancel", id)
		waitRun(t, id, "its end", func(r *api.WorkflowRun) bool { return r.State.Final() })
	}
}
