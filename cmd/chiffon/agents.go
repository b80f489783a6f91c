package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
)

// newAgentsCmd is `chiffon agents`, the list of agents (the daemon: agent.go).
func newAgentsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List agents with their state, load, breaker and last heartbeat",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			agents, err := c.Agents(cmd.Context())
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), agents)
			}
			return printAgentTable(cmd.OutOrStdout(), agents, time.Now())
		},
	}
	cf.add(cmd)
	return cmd
}

func printAgentTable(w io.Writer, agents []orchestrator.AgentInfo, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tSTATUS\tLOAD\tBREAKER\tHEARTBEAT\tVERSION")
	for _, a := range agents {
		hb := "never"
		if a.LastHeartbeat != nil {
			hb = age(now, *a.LastHeartbeat) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n",
			a.ID, dash(string(a.Type)), a.State, dash(a.Status), a.Load, a.Capacity, a.Breaker, hb, dash(a.ProtocolVersion))
	}
	return tw.Flush()
}
