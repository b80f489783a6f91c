package main

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/cobra"
)

// newTokenCmd is `chiffon token new`.
func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make bearer tokens"}
	var file, role string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh 32-character token, or write it to a 0600 file with --file",
		Long: `Prints a fresh 32-character token, or writes it to a 0600 file with --file.
With --role viewer or operator it also prints the orchestrator config lines
that give an API token of that role (api_tokens): a viewer reads tasks and
agents, an operator also submits and cancels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role != "" && role != orchestrator.RoleViewer && role != orchestrator.RoleOperator {
				return usagef(fmt.Sprintf("--role must be %s or %s, got %q", orchestrator.RoleViewer, orchestrator.RoleOperator, role))
			}
			if role != "" && file == "" {
				return usagef("--role needs --file: the orchestrator reads the token from a file")
			}
			tok := broker.NewToken()
			if file == "" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), tok)
				return err
			}
			if err := broker.WriteTokenFile(file, tok); err != nil {
				return err
			}
			if role != "" {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Add to the orchestrator's config, then restart it:\napi_tokens:\n  - {token_file: %s, role: %s}\n", file, role)
				return err
			}
			return nil
		},
	}
	newCmd.Flags().StringVar(&file, "file", "", "write the token to this file (mode 0600) instead of printing it")
	newCmd.Flags().StringVar(&role, "role", "", "viewer or operator: print the config lines giving the token that role")
	cmd.AddCommand(newCmd)
	return cmd
}
