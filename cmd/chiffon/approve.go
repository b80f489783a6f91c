package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newDecideCmd is `chiffon approve ID` (approve) or `chiffon reject ID`.
func newDecideCmd(approve bool) *cobra.Command {
	var cf clientFlags
	var note string
	use, short := "approve ID [--note TEXT]", "Approve a task awaiting approval: it is sent to an agent"
	if !approve {
		use, short = "reject ID [--note TEXT]", "Reject a task awaiting approval: it ends rejected, sent to no agent"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

ID is a task's or a batch's: a batch asks once for all its tasks. A task waits for
approval when its work type's config says approval: required, or when
it is pinned to an agent whose config lists its work type under approval_required. The
task records the decision with the name of the API token that made it, the note and
the time. An operator's token only; a task that does not await approval is refused
(HTTP 409).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.Decide(cmd.Context(), args[0], approve, note)
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				// Not a task: a batch, asking once for all its tasks?
				b, berr := c.DecideBatch(cmd.Context(), args[0], approve, note)
				if errors.As(berr, &ae) && ae.Status == http.StatusNotFound {
					return notFound(berr, fmt.Sprintf("no task or batch %s", args[0]))
				}
				if berr != nil {
					return berr
				}
				if cf.jsonOut {
					return printJSON(cmd.OutOrStdout(), b)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "batch %s %s\n", b.ID, b.State)
				return err
			}
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
	cmd.Flags().StringVar(&note, "note", "", "why: kept on the task with the decision")
	return cmd
}

// approvalText is one line of where an approval stands.
func approvalText(a *task.Approval) string {
	v := a.State + ": " + a.Why
	if a.DecidedAt == nil {
		return v + "; expires " + a.ExpiresAt.Local().Format(time.DateTime)
	}
	v += fmt.Sprintf("; %s by %s at %s", a.State, dash(a.By), a.DecidedAt.Local().Format(time.DateTime))
	if a.Note != "" {
		v += ": " + a.Note
	}
	return v
}
