package main

import (
	"fmt"
	"strconv"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newSubmitCmd is `chiffon submit`.
func newSubmitCmd() *cobra.Command {
	var (
		cf   clientFlags
		tf   taskFlags
		wait bool
		bf   batchFlags
	)
	cmd := &cobra.Command{
		Use:   "submit --to TYPE --work-type W [--param k=v]... [--all | --label k=v | --agents a,b] [--wait]",
		Short: "Submit a task (with --all, a batch: one task per agent) and print its id; with --wait, follow it",
		Long: `Submits a task to the orchestrator and prints its id.

--param k=v sets a parameter, read as the type the work type's schema gives it (the
orchestrator's catalogue, chiffon worktypes TYPE/WORK_TYPE): a whole number, a
number, true or false, a comma-separated list for an array, one of the listed values
for an enum; a string when the schema says nothing of it. --param k:=JSON sets any
JSON value as it is; --params-json gives them all as one object. A value the schema
refuses exits 65 and submits nothing. --hint takes max_duration_seconds, max_memory_mb,
gpu_vram_mb (the GPU memory the task needs on one GPU, in MiB: it goes only to an agent
with a GPU that has that much free, and waits until one has) and agent_id (to pin the
task to one agent).

Without --wait, a task that waits for an operator's yes is said so on stderr, with
the chiffon approve line. With --wait it shows live progress (a bar on a terminal,
plain lines into a pipe, JSON lines with --json), prints the output as it comes
(whole lines, above the bar on a terminal), and exits with the task's exit code.

` + followExitCodes + `

With --all it submits a batch instead: one task on every agent of type --to, each
pinned to its agent, and prints the batch's id. --label k=v (repeatable) keeps the
agents that carry every label given, --agents a,b those named; either implies --all.
--max-parallel N runs at most N of the tasks at once, --stop-on-failure starts no more
once one did not succeed. --hint agent_id is refused with a batch. The agents that get
no task (offline, unknown, or not offering the work type) are listed on stderr.

With --all --wait it follows the batch: a line per change of an agent's state (with
--group, one live line per agent on a terminal), a JSON line per change of the batch
with --json; each agent's output on stdout as it comes, its lines prefixed with the
agent's id, or with --group agent by agent at the end; then a table of the agents
(state, exit code, duration) and a summary.
See also chiffon batch ID and chiffon batches.

` + batchExitCodes,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := tf.request()
			if err != nil {
				return err
			}
			if err := req.Validate(); err != nil {
				return fieldUsage(err)
			}
			batch, err := bf.request(req)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			if req.Parameters, err = tf.typedParams(cmd.Context(), c, req); err != nil {
				return err
			}
			if batch != nil {
				batch.Parameters = req.Parameters
				return submitBatch(cmd, c, *batch, cf.jsonOut, wait, bf.group)
			}
			return submitTask(cmd, c, req, cf.jsonOut, wait)
		},
	}
	cf.add(cmd)
	tf.add(cmd, "hint k=v: max_duration_seconds, max_memory_mb, gpu_vram_mb, agent_id; repeatable")
	f := cmd.Flags()
	f.BoolVar(&wait, "wait", false, "follow the task (or batch) to its end and exit with its exit code")
	bf.add(f)
	addGroupFlag(f, &bf.group)
	return cmd
}

// submitTask submits req and prints its id (the task with jsonOut); with wait, it
// follows the task to its end.
func submitTask(cmd *cobra.Command, c *client.Client, req api.SubmitRequest, jsonOut, wait bool) error {
	task, err := c.Submit(cmd.Context(), req)
	if err != nil {
		return err
	}
	if !wait {
		if jsonOut {
			return printJSON(cmd.OutOrStdout(), task)
		}
		if _, err := fmt.Fprintln(cmd.OutOrStdout(), task.ID); err != nil {
			return err
		}
		if hint := taskview.ApprovalHint(task); hint != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), hint)
		}
		return nil
	}
	if !jsonOut {
		fmt.Fprintln(cmd.ErrOrStderr(), "task", task.ID)
	}
	return followTask(cmd, c, task.ID, jsonOut)
}

// taskFlags are the flags that describe a task, as submit and schedule add take
// them.
type taskFlags struct {
	to, workType, paramsJS string
	params, hints          []string
}

// add defines the flags on cmd, --to and --work-type required; hintUsage is
// --hint's usage.
func (tf *taskFlags) add(cmd *cobra.Command, hintUsage string) {
	f := cmd.Flags()
	f.StringVar(&tf.to, "to", "", "agent type: infra, desktop, code, research")
	f.StringVar(&tf.workType, "work-type", "", "work type, such as run_playbook")
	f.StringArrayVar(&tf.params, "param", nil, "parameter k=v (typed by the work type's schema, else a string) or k:=JSON; repeatable")
	f.StringVar(&tf.paramsJS, "params-json", "", "parameters as one JSON object")
	f.StringArrayVar(&tf.hints, "hint", nil, hintUsage)
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagRequired("work-type")
}

// request is the task the flags describe, or a usage error naming the bad --param
// or --hint.
func (tf *taskFlags) request() (api.SubmitRequest, error) {
	req := api.SubmitRequest{ToAgent: envelope.AgentType(tf.to), WorkType: tf.workType}
	var err error
	if req.Parameters, err = parseKeyValues(tf.paramsJS, tf.params, nil); err != nil {
		return req, usagef("--param: " + err.Error())
	}
	if len(tf.hints) > 0 {
		h, err := taskHints(tf.hints)
		if err != nil {
			return req, usagef("--hint: " + err.Error())
		}
		req.Hints = h
	}
	return req, nil
}

// taskHints reads --hint pairs as a task's hints: max_duration_seconds,
// max_memory_mb, gpu_vram_mb (MiB) and agent_id; another key is an error.
func taskHints(pairs []string) (*task.Hints, error) {
	h, err := parseHints(pairs)
	if err != nil {
		return nil, err
	}
	out := &task.Hints{MaxDurationSeconds: h.MaxDurationSeconds, MaxMemoryMB: h.MaxMemoryMB, AgentID: h.AgentID}
	for k, raw := range h.Extra {
		if k != envelope.KeyGPUVRAMMB {
			return nil, fmt.Errorf("unknown hint %q: a task takes max_duration_seconds, max_memory_mb, gpu_vram_mb and agent_id", k)
		}
		n, _ := strconv.ParseInt(string(raw), 10, 64) // parseHints wrote it
		out.GPUVRAMMB = &n
	}
	return out, nil
}
