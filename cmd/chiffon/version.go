package main

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/spf13/cobra"
)

// newVersionCmd is `chiffon version`.
func newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version the binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := buildinfo.Read()
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "chiffon", b)
			return err
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
