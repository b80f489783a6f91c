package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/spf13/cobra"
)

// newAgentsCmd is `chiffon agents`, the list of agents (the daemon: agent.go).
func newAgentsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List agents with their state, load, breaker, last heartbeat, work types and GPUs",
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
			// In a group of orchestrators, say which one leads: the one that
			// knows these agents.
			if r, err := c.Readiness(cmd.Context()); err == nil && r.Role.Role != "" {
				printLeader(cmd.OutOrStdout(), r.Role)
			}
			return printAgentTable(cmd.OutOrStdout(), agents, time.Now())
		},
	}
	cf.add(cmd)
	return cmd
}

// printLeader says which orchestrator of the group leads, as the one asked sees
// it.
func printLeader(w io.Writer, r api.Role) {
	switch {
	case r.Leader == nil:
		fmt.Fprintf(w, "Leader: none yet (asked a %s)\n", r.Role)
	case r.Role == "leader":
		fmt.Fprintf(w, "Leader: %s, the orchestrator asked (since %s)\n", r.Leader.Name, r.Leader.Since.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "Leader: %s at %s (asked a standby; since %s)\n", r.Leader.Name, dash(r.Leader.API), r.Leader.Since.Format(time.RFC3339))
	}
}

// workTypesWidth bounds the WORK TYPES column of chiffon agents, in characters;
// chiffon worktypes TYPE lists them all.
const workTypesWidth = 32

// printAgentTable is the table of chiffon agents.
func printAgentTable(w io.Writer, agents []api.AgentInfo, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tSTATUS\tLOAD\tBREAKER\tHEARTBEAT\tVERSION\tWORK TYPES\tGPUS\tLIMITS\tLABELS")
	for _, a := range agents {
		hb := "never"
		if a.LastHeartbeat != nil {
			hb = age(now, *a.LastHeartbeat) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.ID, dash(string(a.Type)), a.State, dash(a.Status), a.Load, a.Capacity, a.Breaker, hb, dash(a.ProtocolVersion),
			dash(compactList(a.WorkTypes, workTypesWidth)), dash(taskview.GPUList(a.GPUs)), dash(limitList(a.Limits)), dash(taskview.LabelList(a.Labels)))
	}
	return tw.Flush()
}

// limitList is an agent's limits, compactly: "5/s, ≤64KiB, cap 2, only build,test"
// (its rate, its largest request, its capacity's cap, its allowed work types).
func limitList(l *api.AgentLimits) string {
	if l == nil {
		return ""
	}
	var parts []string
	if l.RateLimit != "" {
		parts = append(parts, l.RateLimit)
	}
	if l.MaxRequestBytes > 0 {
		parts = append(parts, "≤"+sizeUnits(l.MaxRequestBytes))
	}
	if l.MaxConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("cap %d", l.MaxConcurrency))
	}
	if len(l.AllowedWorkTypes) > 0 {
		parts = append(parts, "only "+strings.Join(l.AllowedWorkTypes, ","))
	}
	return strings.Join(parts, ", ")
}

// sizeUnits is n bytes in the largest binary unit that divides it: 64KiB,
// 1MiB, 1500B.
func sizeUnits(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
