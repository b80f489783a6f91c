package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newTasksCmd is `chiffon tasks`, the list of tasks (one task: task.go).
func newTasksCmd() *cobra.Command {
	var (
		cf    clientFlags
		state string
		to    string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "tasks [--state S] [--to TYPE]",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			tasks, err := c.List(cmd.Context(), api.ListOptions{
				State: task.State(state), AgentType: envelope.AgentType(to), Limit: limit,
			})
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), tasks)
			}
			return printTaskTable(cmd.OutOrStdout(), tasks, time.Now())
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, dispatched, running, succeeded, failed, cancelled, error")
	cmd.Flags().StringVar(&to, "to", "", "only tasks for this agent type")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many tasks")
	return cmd
}

func printTaskTable(w io.Writer, tasks []*task.Task, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTO\tWORK TYPE\tAGENT\tPROGRESS\tAGE")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d%%\t%s\n",
			t.ID, t.State, t.ToAgent, t.WorkType, dash(t.AgentID), t.ProgressPercent, age(now, t.CreatedAt))
	}
	return tw.Flush()
}
