package main

import (
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/enrollcli"
	"github.com/spf13/cobra"
)

// enrollConfig is what package enrollcli (chiffon enroll, enrollments, agent
// join, agent revoke) takes from this CLI.
func enrollConfig() enrollcli.Config {
	return enrollcli.Config{
		ClientFlags: func(cmd *cobra.Command) (func() (*client.Client, error), func() bool) {
			cf := &clientFlags{}
			cf.add(cmd)
			return cf.client, func() bool { return cf.jsonOut }
		},
		PrintJSON: printJSON,
		Usage:     usagef,
		JoinURL: func(cmd *cobra.Command) string {
			server, _ := cmd.Flags().GetString("server")
			dataDir, _ := cmd.Flags().GetString("data-dir")
			return (&clientFlags{server: server, dataDir: dataDir}).remoteURL()
		},
	}
}
