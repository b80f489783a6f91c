package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// outputJSON is `output --json`: the whole output as one string, and whether the
// orchestrator holds all of it.
type outputJSON struct {
	ID       string `json:"id"`
	Output   string `json:"output"`
	Complete bool   `json:"complete"`
	// Base64 is set when the output is not UTF-8: Output then holds it in base64.
	Base64 bool `json:"base64,omitempty"`
}

// newOutputCmd is `chiffon output ID`.
func newOutputCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "output ID",
		Short: "Print a task's whole output",
		Long: `Prints a task's whole output as it was written. With --json it prints one object:
{"id", "output", "complete"}, with "base64": true and the output in base64 when it is
not UTF-8 text.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if cf.jsonOut {
				var buf bytes.Buffer
				complete, err := c.Output(cmd.Context(), args[0], &buf)
				if err != nil {
					return err
				}
				o := outputJSON{ID: args[0], Output: buf.String(), Complete: complete}
				if !utf8.Valid(buf.Bytes()) {
					o.Output, o.Base64 = base64.StdEncoding.EncodeToString(buf.Bytes()), true
				}
				return printJSON(cmd.OutOrStdout(), o)
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
