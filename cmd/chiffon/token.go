package main

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/spf13/cobra"
)

// newTokenCmd is `chiffon token new`.
func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Make bearer tokens"}
	var file string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh 32-character token, or write it to a 0600 file with --file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok := broker.NewToken()
			if file != "" {
				return broker.WriteTokenFile(file, tok)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	newCmd.Flags().StringVar(&file, "file", "", "write the token to this file (mode 0600) instead of printing it")
	cmd.AddCommand(newCmd)
	return cmd
}
