package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newCancelCmd is `chiffon cancel ID`.
func newCancelCmd() *cobra.Command {
	var cf clientFlags
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task: its agent stops the work and the task ends cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.Cancel(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), t)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "task %s %s\n", t.ID, t.State)
			return err
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why: the agent ends the task's output with it, and the task's events show it")
	return cmd
}
