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
		wide  bool
	)
	cmd := &cobra.Command{
		Use:   "tasks [--state S] [--to TYPE] [--wide]",
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
			return printTaskTable(cmd.OutOrStdout(), tasks, time.Now(), wide)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, dispatched, running, succeeded, failed, cancelled, error")
	cmd.Flags().StringVar(&to, "to", "", "only tasks for this agent type")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many tasks")
	addWideFlag(cmd, &wide)
	return cmd
}

// addWideFlag adds --wide, which lists whole ids instead of short ones.
func addWideFlag(cmd *cobra.Command, wide *bool) {
	cmd.Flags().BoolVar(wide, "wide", false,
		"show whole ids, not short ones (any command takes a short id, or the first 8 or more characters of an id)")
}

// listID is id as a list shows it: its short id (task.ShortID), or whole when
// wide.
func listID(id string, wide bool) string {
	if wide {
		return id
	}
	return task.ShortID(id)
}

// printTaskTable is the table of `chiffon tasks`; wide shows whole ids.
func printTaskTable(w io.Writer, tasks []*task.Task, now time.Time, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTO\tWORK TYPE\tAGENT\tPROGRESS\tAGE")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d%%\t%s\n",
			listID(t.ID, wide), t.State, t.ToAgent, t.WorkType, dash(t.AgentID), t.ProgressPercent, age(now, t.CreatedAt))
	}
	return tw.Flush()
}
