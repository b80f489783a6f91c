package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

func newUpCmd() *cobra.Command {
	var cfg stackConfig
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole Chiffon on this machine: broker, orchestrator and one agent of each type",
		Long: `Runs an embedded NATS server, the orchestrator with its HTTP API and one agent of
each type (infra, desktop, code, research, from the example configs) in one process,
until interrupted. Tokens are generated into the data dir (mode 0600) on first start;
client commands run in the same directory find the API and its token there, and
from anywhere else with --data-dir (or CHIFFON_DATA_DIR); up prints the lines to use.
Ctrl-C stops everything cleanly: agents drain, stores close.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return err
			}
			logPath := filepath.Join(cfg.DataDir, "chiffon.log")
			logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return err
			}
			defer logFile.Close()
			cfg.Log = newLogger(logFile)

			s, err := startStack(cfg)
			if err != nil {
				return err
			}
			printStack(cmd.OutOrStdout(), s, cfg.Host, cfg.DataDir, logPath)
			stopOnSecondSignal := watchSignals(s)
			defer stopOnSecondSignal()
			select {
			case <-cmd.Context().Done():
				fmt.Fprintln(cmd.OutOrStdout(), "stopping: agents drain (Ctrl-C again to cancel running work), stores close ...")
			case err = <-s.Err():
			}
			s.Stop()
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "stopped")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", DefaultDataDir, "where tokens, the task store and agent caches live")
	f.StringVar(&cfg.Host, "host", "127.0.0.1", "address the broker and the API listen on")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "NATS client port (0 picks a free one)")
	f.IntVar(&cfg.HTTPPort, "http-port", 8080, "HTTP API port (0 picks a free one)")
	return cmd
}

// watchSignals makes a second SIGINT or SIGTERM cancel the agents' running work at once;
// the first one ends the command's context (see main). The returned func stops watching.
func watchSignals(s *stack) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
				if n >= 2 {
					s.StopNow()
				}
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// printStack prints what runs and the lines that point client commands at it from
// anywhere: the data dir's files on this host, the URL and token file elsewhere.
func printStack(w io.Writer, s *stack, host, dataDir, logPath string) {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	tokenFile := filepath.Join(dataDir, apiTokenFile)
	fmt.Fprintln(w, "Chiffon is up.")
	fmt.Fprintf(w, "  NATS broker    %s\n", s.NATSURL)
	fmt.Fprintf(w, "  HTTP API       %s  (token in %s)\n", s.APIURL, tokenFile)
	for _, a := range s.Agents {
		fmt.Fprintf(w, "  agent %-8s %s  data %s\n", a.Type, a.ID, a.DataDir)
	}
	fmt.Fprintf(w, "  logs           %s\n", logPath)
	fmt.Fprintln(w, "Try: chiffon submit --to desktop --work-type system_info --wait")
	fmt.Fprintf(w, "From another directory (or export %s=%s):\n", clientDataDirEnv, dataDir)
	fmt.Fprintf(w, "  chiffon agents --data-dir %s\n", dataDir)
	fmt.Fprintln(w, "From another host, with a copy of the token file:")
	fmt.Fprintf(w, "  chiffon agents --server %s --api-token-file %s\n", s.APIURL, tokenFile)
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		fmt.Fprintf(w, "  (the API listens on %s only: for other hosts, start up with --host and this host's address)\n", host)
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}
