package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Workflows across real processes: a broker, an orchestrator (or an HA group)
// and real agents whose work records each run's request_id in the ledger, so
// that a step made twice shows.

// workflowWorkTypes are the work types of the workflow tests: produce prints
// a JSON object (its structured output); consume keeps the parameters it was
// given, by request_id, and declares count an integer; fail fails.
const workflowWorkTypes = `  produce:
    shell: |
      echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
      if [ -n "${CHIFFON_PARAM_SLEEP:-}" ]; then sleep "$CHIFFON_PARAM_SLEEP"; fi
      echo '{"n": 3, "tag": "v1"}'
    env: [PATH]
    set_env: {RUNS_FILE: %[1]s}
    schema: {type: object, properties: {sleep: {type: string}}}
  consume:
    shell: |
      echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
      cat > "%[2]s/$CHIFFON_REQUEST_ID.json"
    env: [PATH]
    set_env: {RUNS_FILE: %[1]s}
    schema:
      type: object
      required: [count]
      properties:
        count: {type: integer}
        label: {type: string}
  fail:
    shell: |
      echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
      exit 3
    env: [PATH]
    set_env: {RUNS_FILE: %[1]s}
`

// newWorkflowCluster is a cluster of n code agents with the workflow work
// types and the orchestrator config's extra YAML; seen is where consume
// keeps what it was given.
func newWorkflowCluster(t *testing.T, n int, orchExtra string) (c *cluster, seen string) {
	c = newCluster(t, n)
	seen = filepath.Join(c.dir, "seen")
	if err := os.MkdirAll(seen, 0o700); err != nil {
		t.Fatal(err)
	}
	c.extraWorkTypes = fmt.Sprintf(workflowWorkTypes, c.runsFile, seen)
	for _, id := range c.agentIDs {
		c.writeAgentConfig(id)
	}
	c.orchExtra = orchExtra
	c.writeOrchConfig()
	return c, seen
}

// branchWorkflow: produce -> consume(count from produce's output) -> check
// (fails) -> deploy (needs check: skipped); notify on check's failure; audit
// always after consume.
const branchWorkflow = `workflows:
  - name: branch
    timeout: 5m
    params: {label: {type: string, default: nightly}}
    steps:
      - {name: produce, task: {to_agent: code, work_type: produce}}
      - name: consume
        needs: [{step: produce}]
        task: {to_agent: code, work_type: consume, parameters: {count: "${steps.produce.output.n}", label: "${params.label}-${steps.produce.output.tag}"}}
      - {name: check, needs: [{step: consume}], task: {to_agent: code, work_type: fail}}
      - {name: deploy, needs: [{step: check}], task: {to_agent: code, work_type: count, parameters: {n: 1}}}
      - {name: notify, needs: [{step: check, when: failure}], task: {to_agent: code, work_type: count, parameters: {n: 2}}}
      - {name: audit, needs: [{step: deploy, when: always}], task: {to_agent: code, work_type: count, parameters: {n: 3}}}
`

// waitRunEnd waits until run id ended and returns it.
func waitRunEnd(t *testing.T, c *client.Client, id string, d time.Duration) *api.WorkflowRun {
	t.Helper()
	var r *api.WorkflowRun
	deadline := time.Now().Add(d)
	for {
		var err error
		r, err = c.Run(fleetCtx(t), id)
		if err == nil && r.State.Final() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end within %s: %+v %v", id, d, r, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the API the way an operator's client does
	}
}

// stepStates maps a run's steps to their states.
func stepStates(r *api.WorkflowRun) map[string]string {
	out := map[string]string{}
	for _, s := range r.Steps {
		out[s.Name] = string(s.State)
	}
	return out
}

// stepsRanOnce fails unless each step of r that made a task ran exactly once
// by the ledger (once its task succeeded or failed on the agent), and no
// skipped step ran.
func stepsRanOnce(t *testing.T, c *client.Client, runs map[string]int, r *api.WorkflowRun) {
	t.Helper()
	for _, s := range r.Steps {
		if s.TaskID == "" {
			if s.State != api.StepSkipped && s.Approval == nil && s.BatchID == "" {
				t.Fatalf("step %s %s made no task", s.Name, s.State)
			}
			continue
		}
		tk, err := c.Get(fleetCtx(t), s.TaskID)
		if err != nil {
			t.Fatalf("step %s's task %s: %v", s.Name, s.TaskID, err)
		}
		if n := runs[tk.RequestID]; n != 1 {
			t.Fatalf("step %s (task %s, %s) ran %d times, want once", s.Name, tk.ID, tk.State, n)
		}
	}
}

// TestWorkflowTakesTheFailureBranchWithTypedOutput: a six-step workflow of
// the config, started with `chiffon workflow run --wait`: produce's output
// reaches consume as an integer its schema accepts (a string would be
// refused) and inside text; check fails, so deploy is skipped, notify (on
// failure) and audit (always) run; the run fails, --wait says so with the
// exit code of a failed task, and every step that ran ran once.
func TestWorkflowTakesTheFailureBranchWithTypedOutput(t *testing.T) {
	c, seen := newWorkflowCluster(t, 2, branchWorkflow)
	c.start()
	cli := []string{"--server", "http://" + c.httpAddr, "--api-token-file", c.secret("api.token")}
	res := chiffonBinary(t, c.bin, append([]string{"workflow", "run", "branch", "--param", "label=manual", "--wait"}, cli...)...)
	runs, err := c.client.Runs(fleetCtx(t), "branch", 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v %v:\n%s%s", runs, err, res.stdout, res.stderr)
	}
	r := waitRunEnd(t, c.client, runs[0].ID, time.Minute)
	want := map[string]string{"produce": "succeeded", "consume": "succeeded", "check": "failed",
		"deploy": "skipped", "notify": "succeeded", "audit": "succeeded"}
	if got := stepStates(r); !mapsEqual(got, want) || r.State != api.RunFailed {
		t.Fatalf("run %s, steps %v; want failed, %v", r.State, got, want)
	}
	failedTask := chiffonBinary(t, c.bin, append([]string{"submit", "--to", "code", "--work-type", "fail", "--wait"}, cli...)...)
	if res.code == 0 || res.code != failedTask.code {
		t.Fatalf("workflow run --wait of a failed run: exit %d, want %d as for a failed task\n%s%s",
			res.code, failedTask.code, res.stdout, res.stderr)
	}
	for _, line := range []string{"produce", "check", "deploy", "skipped", "notify"} {
		if !strings.Contains(res.stdout+res.stderr, line) {
			t.Fatalf("workflow run --wait shows no %q:\n%s%s", line, res.stdout, res.stderr)
		}
	}
	consume, err := c.client.Get(fleetCtx(t), r.Step("consume").TaskID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(seen, consume.RequestID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var given map[string]any
	if err := json.Unmarshal(data, &given); err != nil {
		t.Fatalf("consume was given %q: %v", data, err)
	}
	if n, ok := given["count"].(float64); !ok || n != 3 || given["label"] != "manual-v1" {
		t.Fatalf("consume was given %s; want count the number 3, label manual-v1", data)
	}
	stepsRanOnce(t, c.client, c.runs(), r)
	t.Logf("chiffon workflow run --wait (exit %d):\n%s%s", res.code, res.stdout, res.stderr)
}

// gateWorkflow: a gate, then produce, then consume.
const gateWorkflow = `workflows:
  - name: gated
    steps:
      - {name: approve, approval: {note: "maintenance window"}}
      - {name: produce, needs: [{step: approve}], task: {to_agent: code, work_type: produce, parameters: {sleep: "%s"}}}
      - {name: consume, needs: [{step: produce}], task: {to_agent: code, work_type: consume, parameters: {count: "${steps.produce.output.n}"}}}
`

// TestWorkflowGateHoldsTheRunAcrossAKill: a run waits at its gate, across an
// orchestrator SIGKILL, with nothing run; `chiffon workflow approve` lets it
// go on; the orchestrator SIGKILLed again while produce runs (Badger) does
// not make any step twice; the run succeeds.
func TestWorkflowGateHoldsTheRunAcrossAKill(t *testing.T) {
	c, _ := newWorkflowCluster(t, 1, fmt.Sprintf(gateWorkflow, "2"))
	c.start()
	cli := []string{"--server", "http://" + c.httpAddr, "--api-token-file", c.secret("api.token")}
	r, err := c.client.StartRun(fleetCtx(t), "gated", api.WorkflowRunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("the gate to wait", 30*time.Second, func() bool {
		got, err := c.client.Run(fleetCtx(t), r.ID)
		return err == nil && got.Step("approve").State == api.StepRunning
	})
	restartOrchestrator(c)
	c.waitAgentOnline("code-1", time.Now().Add(-time.Second))
	got, err := c.client.Run(fleetCtx(t), r.ID)
	if err != nil || got.Step("approve").State != api.StepRunning || got.Step("produce").State != api.StepPending {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
	if runs := c.runs(); len(runs) != 0 {
		t.Fatalf("the ledger holds %v before the approval", runs)
	}
	res := chiffonBinary(t, c.bin, append([]string{"workflow", "approve", r.ID, "approve", "--note", "go"}, cli...)...)
	if res.code != 0 {
		t.Fatalf("chiffon workflow approve: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	c.waitFor("produce to run", 30*time.Second, func() bool { return len(c.runs()) == 1 })
	restartOrchestrator(c) // mid-step
	end := waitRunEnd(t, c.client, r.ID, time.Minute)
	if end.State != api.RunSucceeded {
		t.Fatalf("run %s: %v", end.State, stepStates(end))
	}
	a := end.Step("approve").Approval
	if a == nil || a.State != task.ApprovalApproved || a.Note != "go" {
		t.Fatalf("the gate's approval: %+v", a)
	}
	stepsRanOnce(t, c.client, c.runs(), end)
}

// TestWorkflowCancelStopsIt: `chiffon workflow cancel` cancels the running
// step's task on its agent and skips the steps after it; they never run.
func TestWorkflowCancelStopsIt(t *testing.T) {
	c, _ := newWorkflowCluster(t, 1, fmt.Sprintf(gateWorkflow, "30"))
	c.start()
	cli := []string{"--server", "http://" + c.httpAddr, "--api-token-file", c.secret("api.token")}
	r, err := c.client.StartRun(fleetCtx(t), "gated", api.WorkflowRunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("the gate to wait", 30*time.Second, func() bool {
		got, err := c.client.Run(fleetCtx(t), r.ID)
		return err == nil && got.Step("approve").State == api.StepRunning
	})
	if _, err := c.client.DecideStep(fleetCtx(t), r.ID, "approve", true, ""); err != nil {
		t.Fatal(err)
	}
	c.waitFor("produce to run", 30*time.Second, func() bool { return len(c.runs()) == 1 })
	res := chiffonBinary(t, c.bin, append([]string{"workflow", "cancel", r.ID}, cli...)...)
	if res.code != 0 {
		t.Fatalf("chiffon workflow cancel: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	end := waitRunEnd(t, c.client, r.ID, time.Minute)
	want := map[string]string{"approve": "succeeded", "produce": "failed", "consume": "skipped"}
	if got := stepStates(end); end.State != api.RunCancelled || !mapsEqual(got, want) {
		t.Fatalf("run %s %v, want cancelled %v", end.State, got, want)
	}
	tk, err := c.client.Get(fleetCtx(t), end.Step("produce").TaskID)
	if err != nil || tk.State != task.StateCancelled {
		t.Fatalf("produce's task: %+v %v", tk, err)
	}
	if runs := c.runs(); len(runs) != 1 {
		t.Fatalf("the ledger: %v, want produce's run alone", runs)
	}
	if _, err := c.client.CancelRun(fleetCtx(t), r.ID); err == nil {
		t.Fatal("a cancel of an ended run was accepted")
	}
}

// TestWorkflowSurvivesTheHALeaderKilled: a three-step workflow made through
// the API on a JetStream HA group; the leader SIGKILLed while the second
// step runs; the standby takes the run over and every step runs once.
func TestWorkflowSurvivesTheHALeaderKilled(t *testing.T) {
	s := newHASite(t, 2, 2, haLease)
	lead, standby := s.startGroup()
	spec := api.WorkflowSpec{Name: "ha", Steps: []api.WorkflowStep{
		{Name: "one", Task: &api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": 1}}},
		{Name: "two", Needs: []api.WorkflowNeed{{Step: "one"}}, Task: &api.SubmitRequest{ToAgent: "code", WorkType: "count",
			Parameters: map[string]any{"n": 2, "sleep": "3"}}},
		{Name: "three", Needs: []api.WorkflowNeed{{Step: "two"}}, Task: &api.SubmitRequest{ToAgent: "code", WorkType: "count",
			Parameters: map[string]any{"n": 3}}},
	}}
	if _, err := s.orchs[lead].client.PutWorkflow(fleetCtx(t), spec); err != nil {
		t.Fatal(err)
	}
	r, err := s.orchs[lead].client.StartRun(fleetCtx(t), "ha", api.WorkflowRunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s.waitFor("step two to run", time.Minute, func() bool {
		got, err := s.orchs[lead].client.Run(fleetCtx(t), r.ID)
		return err == nil && got.Step("two").State == api.StepRunning && len(s.runs()) >= 2
	})
	s.orchs[lead].p.kill(t)
	if got := s.leader(30 * time.Second); got != standby {
		t.Fatalf("orchestrator %d leads after the kill, want the standby", got)
	}
	end := waitRunEnd(t, s.orchs[standby].client, r.ID, 2*time.Minute)
	if end.State != api.RunSucceeded {
		t.Fatalf("run %s: %v", end.State, stepStates(end))
	}
	stepsRanOnce(t, s.orchs[standby].client, s.runs(), end)
}
