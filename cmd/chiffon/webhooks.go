package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"github.com/spf13/cobra"
)

// newWebhooksCmd is `chiffon webhooks deliveries`.
func newWebhooksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "The webhook deliveries of the orchestrator's events"}
	var cf clientFlags
	deliveries := &cobra.Command{
		Use:   "deliveries",
		Short: "List the last webhook deliveries: event, receiver, state, attempts and the last answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ds, err := c.Deliveries(cmd.Context())
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), ds)
			}
			return printDeliveries(cmd.OutOrStdout(), ds, time.Now())
		},
	}
	cf.add(deliveries)
	cmd.AddCommand(deliveries)
	return cmd
}

func printDeliveries(w io.Writer, ds []webhook.Delivery, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEVENT\tSTATE\tATTEMPTS\tLAST\tRECEIVER\tCREATED")
	for _, d := range ds {
		last := "-"
		switch {
		case d.LastErr != "":
			last = d.LastErr
		case d.LastCode != 0:
			last = fmt.Sprint(d.LastCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s ago\n", d.ID, d.Event, d.State, d.Attempts, last, d.Receiver, age(now, d.Created))
	}
	return tw.Flush()
}
