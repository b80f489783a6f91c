package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newOutputCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "output ID",
		Short: "Print a task's whole output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			complete, err := c.Output(cmd.Context(), args[0], cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !complete {
				fmt.Fprintln(cmd.ErrOrStderr(), "chiffon: the output is not complete yet")
			}
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}
