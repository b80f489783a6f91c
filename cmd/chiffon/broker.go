package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/spf13/cobra"
)

func newBrokerCmd() *cobra.Command {
	var (
		listen    string
		jetstream bool
		storeDir  string
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run an embedded NATS server until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, portStr, err := net.SplitHostPort(listen)
			if err != nil {
				return usagef("--listen must be host:port: " + err.Error())
			}
			port, err := strconv.Atoi(portStr)
			if err != nil || port < 0 || port > 65535 {
				return usagef("--listen port must be a number from 0 to 65535")
			}
			if jetstream && storeDir == "" {
				return usagef("--jetstream needs --store-dir")
			}
			log := newLogger(cmd.ErrOrStderr())
			srv, err := broker.StartServer(broker.ServerConfig{
				Host: host, Port: port, JetStream: jetstream, StoreDir: storeDir,
				Debug: rootLog.level == "debug",
			})
			if err != nil {
				return err
			}
			log.Info("broker listening", "url", srv.ClientURL(), "jetstream", jetstream)
			fmt.Fprintln(cmd.OutOrStdout(), srv.ClientURL())
			<-cmd.Context().Done()
			log.Info("broker stopping")
			srv.Shutdown()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "address for NATS clients")
	cmd.Flags().BoolVar(&jetstream, "jetstream", false, "enable JetStream")
	cmd.Flags().StringVar(&storeDir, "store-dir", "", "JetStream store directory (required with --jetstream)")
	return cmd
}
