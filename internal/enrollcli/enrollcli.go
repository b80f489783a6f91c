// Package enrollcli is the CLI of host enrollment: `chiffon enroll` (an
// operator makes a one-time join code), `chiffon enrollments`, `chiffon agent
// join` (a new host joins with it) and `chiffon agent revoke`. It talks to the
// orchestrator through package client; cmd/chiffon wires it with its client
// flags and ways of printing.
package enrollcli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/spf13/cobra"
)

// Config is what the commands take from the CLI that holds them.
type Config struct {
	// ClientFlags adds the client flags to cmd and returns the client they
	// make and whether --json was given.
	ClientFlags func(cmd *cobra.Command) (newClient func() (*client.Client, error), jsonOut func() bool)
	// PrintJSON writes v as JSON.
	PrintJSON func(w io.Writer, v any) error
	// Usage makes a usage error (exit code 2) of msg.
	Usage func(msg string) error
	// JoinURL, when set, is the orchestrator's URL for other hosts as the
	// flags of cmd find it, for the join line `chiffon enroll` prints; ""
	// (or no func) means the URL the client reached it at.
	JoinURL func(cmd *cobra.Command) string
}

// EnrollCommand is `chiffon enroll`.
func EnrollCommand(cfg Config) *cobra.Command {
	var req api.EnrollRequest
	var labels []string
	var typ string
	cmd := &cobra.Command{
		Use:   "enroll --type TYPE --id ID",
		Short: "Make a one-time code with which a new host joins as agent ID",
		Long: `Makes a one-time join code bound to agent ID of TYPE (operators only), and prints
the command the new host runs: chiffon agent join. The code works once, until --ttl
passes; it is shown only now. chiffon agent revoke ID voids an unused code.`,
		Args: cobra.NoArgs,
	}
	newClient, jsonOut := cfg.ClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req.Type = envelope.AgentType(typ)
		for _, l := range labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return cfg.Usage(fmt.Sprintf("--label %q: want key=value", l))
			}
			if req.Labels == nil {
				req.Labels = map[string]string{}
			}
			req.Labels[k] = v
		}
		c, err := newClient()
		if err != nil {
			return err
		}
		code, err := c.Enroll(cmd.Context(), req)
		if err != nil {
			return err
		}
		if jsonOut() {
			return cfg.PrintJSON(cmd.OutOrStdout(), code)
		}
		joinURL := c.BaseURL
		if cfg.JoinURL != nil {
			joinURL = cmp.Or(cfg.JoinURL(cmd), joinURL)
		}
		return printCode(cmd.OutOrStdout(), joinURL, code)
	}
	fl := cmd.Flags()
	fl.StringVar(&req.AgentID, "id", "", "the new agent's id (required)")
	fl.StringVar(&typ, "type", "", "its agent type: infra, desktop, code or research (required)")
	fl.StringArrayVar(&labels, "label", nil, "a label key=value for its config; repeatable")
	fl.StringVar(&req.TTL, "ttl", "1h", "how long the code may be used (at most 168h)")
	_ = cmd.MarkFlagRequired("id")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

// printCode shows the code and the command that uses it, with the
// orchestrator at joinURL.
func printCode(w io.Writer, joinURL string, code *api.EnrollCode) error {
	_, err := fmt.Fprintf(w, "join code for agent %s (%s), valid until %s, usable once:\n  %s\n\non the new host:\n  chiffon agent join --orchestrator %s --ca-fingerprint %s %s\n",
		code.Enrollment.AgentID, code.Enrollment.Type, code.Enrollment.ExpiresAt.Local().Format(time.DateTime), code.Code,
		joinURL, code.CAFingerprint, code.Code)
	return err
}

// EnrollmentsCommand is `chiffon enrollments`.
func EnrollmentsCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enrollments",
		Short: "List the hosts enrolled: who enrolled and revoked whom, and when",
		Args:  cobra.NoArgs,
	}
	newClient, jsonOut := cfg.ClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := newClient()
		if err != nil {
			return err
		}
		list, err := c.Enrollments(cmd.Context())
		if err != nil {
			return err
		}
		if jsonOut() {
			return cfg.PrintJSON(cmd.OutOrStdout(), list)
		}
		return printEnrollments(cmd.OutOrStdout(), list)
	}
	return cmd
}

// printEnrollments writes a line per enrollment.
func printEnrollments(w io.Writer, list []api.Enrollment) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTYPE\tSTATE\tENROLLED\tBY\tJOINED FROM\tREVOKED BY")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.AgentID, e.Type, e.State,
			e.CreatedAt.Local().Format(time.DateTime), dash(e.CreatedBy), dash(e.JoinedFrom), dash(e.RevokedBy))
	}
	return tw.Flush()
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// RevokeCommand is `chiffon agent revoke ID`.
func RevokeCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an enrolled agent: its NATS key, its tokens, its place in the orchestrator",
		Long: `Revokes agent ID (operators only): the broker closes its connection and refuses its
key from now on, its tokens are refused, the orchestrator forgets it, and the tasks it
was running fail (whether they ran is unknown). An unused join code is voided.`,
		Args: cobra.ExactArgs(1),
	}
	newClient, jsonOut := cfg.ClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := newClient()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
		defer cancel()
		en, err := c.RevokeAgent(ctx, args[0])
		if err != nil {
			return err
		}
		if jsonOut() {
			return cfg.PrintJSON(cmd.OutOrStdout(), en)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "agent %s revoked by %s\n", en.AgentID, dash(en.RevokedBy))
		return err
	}
	return cmd
}
