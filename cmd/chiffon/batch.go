package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newBatchCmd is `chiffon batch ID`, one batch (the list: newBatchesCmd; making
// one: submit --all).
func newBatchCmd() *cobra.Command {
	var (
		cf          clientFlags
		wait, group bool
	)
	cmd := &cobra.Command{
		Use:   "batch ID [--wait [--group]] | batch retry ID",
		Short: "Show a batch (a task on each matching agent): its state and each agent's task",
		Long: `Shows a batch, made by submit --all or by a schedule: its state, what it runs and on
which agents, then one row per agent with the state and progress of its task.
An agent that got no task shows offline, unknown (never heard from), unsupported (it
does not offer the work type) or skipped (not started, for --stop-on-failure); waiting
is a task waiting for room under --max-parallel.

With --wait it follows the batch to its end as submit --all --wait does (a live line
per agent on a terminal, a line per change into a pipe, JSON lines with --json) and
exits with the batch's state. Each agent's output goes to stdout as it comes, each
line prefixed with the agent's id ("infra-1: ..."), or with --group agent by agent
once the batch ended; a table of the agents (state, exit code, duration) ends it.

` + batchExitCodes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if group && !wait {
				return usagef("--group is for --wait")
			}
			if wait {
				return followBatch(cmd, c, args[0], cf.jsonOut, group)
			}
			b, err := c.Batch(cmd.Context(), args[0])
			if err != nil {
				return noBatch(err, args[0])
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), b)
			}
			return printBatch(cmd.OutOrStdout(), b)
		},
	}
	cf.add(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the batch to its end and exit 0 only if it succeeded")
	addGroupFlag(cmd.Flags(), &group)
	cmd.AddCommand(newBatchRetryCmd())
	return cmd
}

// newBatchesCmd is `chiffon batches`, the list of batches.
func newBatchesCmd() *cobra.Command {
	var (
		cf    clientFlags
		limit int
		wide  bool
	)
	cmd := &cobra.Command{
		Use:   "batches [--limit N] [--wide]",
		Short: "List batches, newest first, with their agents counted by state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usagef("--limit: must be from 1 to 1000")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			bs, err := c.Batches(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), bs)
			}
			return printBatchTable(cmd.OutOrStdout(), bs, time.Now(), wide)
		},
	}
	cf.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many batches")
	addWideFlag(cmd, &wide)
	return cmd
}

// printBatchTable is the table of `chiffon batches`; wide shows whole ids.
func printBatchTable(w io.Writer, bs []*api.Batch, now time.Time, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tWORK\tTARGETS\tCREATED")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", listID(b.ID, wide), b.State, taskview.WorkText(b.ToAgent, b.WorkType), taskview.CountsText(b.Counts), age(now, b.CreatedAt))
	}
	return tw.Flush()
}

// printBatch shows one batch: its header lines, then its agents.
func printBatch(w io.Writer, b *api.Batch) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", b.ID)
	row("State", string(b.State))
	taskview.BatchRequestRows(row, &b.BatchRequest)
	if b.Schedule != "" {
		s := b.Schedule
		if b.FireTime != nil {
			s += ", fired for " + b.FireTime.Local().Format(time.DateTime)
		}
		row("Schedule", s)
	}
	if a := b.Approval; a != nil {
		row("Approval", approvalText(a))
	}
	row("Targets", taskview.CountsText(b.Counts))
	row("Created", b.CreatedAt.Local().Format(time.DateTime))
	if b.FinishedAt != nil {
		row("Finished", fmt.Sprintf("%s (in %s)", b.FinishedAt.Local().Format(time.DateTime),
			b.FinishedAt.Sub(b.CreatedAt).Round(time.Millisecond)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printTargets(w, b.Targets)
}

// printTargets is the table of a batch's agents.
func printTargets(w io.Writer, targets []api.BatchTarget) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tPROGRESS\tTASK")
	for _, t := range targets {
		fmt.Fprintf(tw, "%s\t%s\t%d%%\t%s\n", t.AgentID, t.State, t.ProgressPercent, dash(t.TaskID))
	}
	return tw.Flush()
}

// noTask lists, on w, the agents of b that get no task, and why, and those it
// waits for to register.
func noTask(w io.Writer, b *api.Batch) {
	var skipped []api.BatchTarget
	var registering []string
	for _, t := range b.Targets {
		switch {
		case t.State == api.TargetRegistering:
			registering = append(registering, t.AgentID)
		case t.TaskID == "":
			skipped = append(skipped, t)
		}
	}
	if len(registering) > 0 && b.RegisterUntil != nil {
		fmt.Fprintf(w, "waiting until %s for %s to register: %s\n", b.RegisterUntil.Local().Format(time.TimeOnly),
			plural(len(registering), "agent"), strings.Join(registering, ", "))
	}
	if len(skipped) == 0 {
		return
	}
	fmt.Fprintf(w, "%d of %s get no task:\n", len(skipped), plural(len(b.Targets), "agent"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range skipped {
		why := t.State
		switch t.State {
		case api.TargetOffline:
			why = "offline"
		case api.TargetUnknown:
			why = "unknown: never heard from"
		case api.TargetUnsupported:
			why = "unsupported: it does not offer " + b.WorkType
		}
		fmt.Fprintf(tw, "  %s\t%s\n", t.AgentID, why)
	}
	_ = tw.Flush()
}

// batchFlags are the flags that make a batch of a task: submit's and schedule
// add's.
type batchFlags struct {
	all           bool
	labels        []string
	agents        []string
	maxParallel   int
	stopOnFailure bool
	// group is --group, of submit: set by addGroupFlag.
	group bool
	flags *pflag.FlagSet
}

// addGroupFlag defines --group, of following a batch, on f.
func addGroupFlag(f *pflag.FlagSet, group *bool) {
	f.BoolVar(group, "group", false, "with a batch and --wait: each agent's output at the end, agent by agent, not line by line as it comes")
}

// add defines the batch flags on f.
func (bf *batchFlags) add(f *pflag.FlagSet) {
	bf.flags = f
	f.BoolVar(&bf.all, "all", false, "a batch: one task on every agent of the type (--label and --agents narrow it)")
	f.StringArrayVar(&bf.labels, "label", nil, "a batch on the agents carrying label k=v; repeatable (all must match)")
	f.StringSliceVar(&bf.agents, "agents", nil, "a batch on these agents only, by id: a,b")
	f.IntVar(&bf.maxParallel, "max-parallel", 0, "with a batch: at most N of its tasks at once (0: all at once)")
	f.BoolVar(&bf.stopOnFailure, "stop-on-failure", false, "with a batch: start no more tasks once one did not succeed")
}

// batch reports whether the flags ask for a batch.
func (bf *batchFlags) batch() bool { return bf.all || len(bf.labels) > 0 || len(bf.agents) > 0 }

// request makes the batch of task the flags ask for, nil when they ask for
// none, and checks it; a mistake is a usage error naming the flag.
func (bf *batchFlags) request(task api.SubmitRequest) (*api.BatchRequest, error) {
	if !bf.batch() {
		for _, name := range []string{"max-parallel", "stop-on-failure", "group"} {
			if bf.flags.Changed(name) {
				return nil, usagef("--" + name + " is for a batch: add --all, --label or --agents")
			}
		}
		return nil, nil
	}
	if task.Hints != nil && task.Hints.AgentID != "" {
		return nil, usagef("--hint agent_id is not for a batch (--all, --label, --agents): each agent gets its own task; name the agents with --agents")
	}
	req := &api.BatchRequest{ToAgent: task.ToAgent, WorkType: task.WorkType, Parameters: task.Parameters,
		Hints: task.Hints, Agents: bf.agents, MaxParallel: bf.maxParallel, StopOnFailure: bf.stopOnFailure}
	for _, kv := range bf.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef(fmt.Sprintf("--label: %q: want key=value", kv))
		}
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		if old, dup := req.Labels[k]; dup && old != v {
			return nil, usagef(fmt.Sprintf("--label: %s given twice, as %q and %q: an agent carries one", k, old, v))
		}
		req.Labels[k] = v
	}
	if err := req.Validate(); err != nil {
		return nil, fieldUsage(err)
	}
	return req, nil
}

// fieldFlags are the flags (or argument) that give the request's fields.
var fieldFlags = map[string]string{
	"name": "NAME", "cron": "--cron", "tz": "--tz", "catch_up": "--catch-up", "to_agent": "--to",
	"work_type": "--work-type", "parameters": "--param", "labels": "--label", "max_parallel": "--max-parallel",
	"workflow.name": "--workflow",
}

// fieldUsage turns a request's field error into a usage error naming the flag
// (or argument) that gives the field.
func fieldUsage(err error) error {
	var fe *api.FieldError
	if !errors.As(err, &fe) {
		return usagef(err.Error())
	}
	field := strings.TrimPrefix(strings.TrimPrefix(fe.Field, "task."), "batch.")
	msg := fe.Message
	flag, ok := fieldFlags[field]
	switch {
	case ok:
	case strings.HasPrefix(field, "hints."):
		flag = "--hint " + strings.TrimPrefix(field, "hints.")
	case strings.HasPrefix(field, "agents"):
		flag = "--agents"
		if field != "agents" {
			msg = field + ": " + msg
		}
	default:
		flag = fe.Field
	}
	return usagef(flag + ": " + msg)
}

// submitBatch makes batch req and prints its id, or its JSON; with wait it
// follows it to its end (its output grouped per agent with group).
func submitBatch(cmd *cobra.Command, c *client.Client, req api.BatchRequest, jsonOut, wait, group bool) error {
	if group && !wait {
		return usagef("--group is for --wait")
	}
	b, err := c.CreateBatch(cmd.Context(), req)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if !wait {
		if jsonOut {
			return printJSON(cmd.OutOrStdout(), b)
		}
		noTask(stderr, b)
		if _, err := fmt.Fprintln(cmd.OutOrStdout(), b.ID); err != nil {
			return err
		}
		if hint := taskview.BatchApprovalHint(b); hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return nil
	}
	if !jsonOut {
		fmt.Fprintf(stderr, "batch %s: %s\n", b.ID, plural(len(b.Targets), "agent"))
	}
	return followBatch(cmd, c, b.ID, jsonOut, group)
}

// plural is n things, such as "1 agent" or "3 agents".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
