package main

import (
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newBatchRetryCmd is `chiffon batch retry ID`.
func newBatchRetryCmd() *cobra.Command {
	var (
		cf          clientFlags
		wait, group bool
	)
	cmd := &cobra.Command{
		Use:   "retry ID [--wait [--group]]",
		Short: "Run a finished batch again on the agents where it did not succeed",
		Long: `Makes a new batch with the request of batch ID (agent type, work type, parameters,
hints, --max-parallel, --stop-on-failure) on the agents of ID whose task did not
succeed or that got none (offline, unknown, unsupported, skipped), named as --agents
names them, and prints its id (its JSON with --json). With --wait it follows the new
batch as chiffon batch ID --wait does.

It is refused while batch ID runs (or awaits its approval), and when every agent of
it succeeded: there is nothing to run again.

` + batchExitCodes,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if group && !wait {
				return usagef("--group is for --wait")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			b, err := c.Batch(cmd.Context(), args[0])
			if err != nil {
				return noBatch(err, args[0])
			}
			req, err := retryRequest(b)
			if err != nil {
				return err
			}
			if !cf.jsonOut {
				fmt.Fprintf(cmd.ErrOrStderr(), "batch %s again on %s\n", b.ID, strings.Join(req.Agents, ", "))
			}
			return submitBatch(cmd, c, *req, cf.jsonOut, wait, group)
		},
	}
	cf.add(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the new batch to its end and exit 0 only if it succeeded")
	addGroupFlag(cmd.Flags(), &group)
	return cmd
}

// retryRequest is the request of a batch that runs b again on its agents that
// did not succeed, pinned by id; an error when b has not finished or every
// agent succeeded.
func retryRequest(b *api.Batch) (*api.BatchRequest, error) {
	if b.FinishedAt == nil || !b.State.Final() {
		return nil, fmt.Errorf("batch %s is %s: wait for its end (chiffon batch %s --wait), then retry it", b.ID, b.State, b.ID)
	}
	var agents []string
	for _, t := range b.Targets {
		if t.State != string(task.StateSucceeded) {
			agents = append(agents, t.AgentID)
		}
	}
	if len(agents) == 0 {
		return nil, fmt.Errorf("batch %s succeeded on every agent (%s): nothing to retry", b.ID, plural(len(b.Targets), "agent"))
	}
	req := api.BatchRequest{ToAgent: b.ToAgent, WorkType: b.WorkType, Parameters: b.Parameters, Hints: b.Hints,
		Agents: agents, MaxParallel: b.MaxParallel, StopOnFailure: b.StopOnFailure}
	return &req, nil
}
