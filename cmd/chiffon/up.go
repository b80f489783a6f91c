package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/cobra"
)

// newUpCmd is `chiffon up`.
func newUpCmd() *cobra.Command {
	var cfg localConfig
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole Chiffon on this machine: broker, orchestrator and one agent of each type",
		Long: `Runs an embedded NATS server, the orchestrator with its HTTP API and one agent of
each type (infra, desktop, code, research, from the example configs) in one process,
until interrupted. Tokens are generated into the data dir (mode 0600) on first start;
client commands run in the same directory find the API and its token there, and
from anywhere else with --data-dir (or CHIFFON_DATA_DIR); up prints the lines to use.
With --host beyond loopback (an address of this host, or 0.0.0.0 for every one)
the API and the dashboard serve HTTPS with a certificate of the site CA
(secrets/ca.pem); clients on other hosts trust it with --api-ca-file, and client
commands given the data dir trust it by themselves.
With --operator, a new data dir is made in NATS operator mode (as chiffon init
--operator makes a site): each daemon connects with a .creds, and other hosts join
with a one-time code of chiffon enroll (chiffon agent join, over HTTPS: give --host).
A data dir keeps the mode it was made in: leaving --operator out then changes
nothing, and --operator on a data dir of NKey users is refused.
Ctrl-C stops everything cleanly: agents drain, stores close.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd, cfg, cmd.Flags().Changed("operator"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", DefaultDataDir, "where tokens, the task store and agent caches live")
	f.StringVar(&cfg.Host, "host", "127.0.0.1", "address the broker and the API listen on; beyond loopback the API serves HTTPS")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "NATS client port (0 picks a free one)")
	f.IntVar(&cfg.HTTPPort, "http-port", 8080, "HTTP API port (0 picks a free one)")
	f.BoolVar(&cfg.Operator, "operator", false, "make a new data dir in NATS operator mode, where hosts join with chiffon enroll codes; an existing data dir keeps its mode")
	return cmd
}

// runUp starts the stack, writes the API's URL into the data dir for the client
// commands, prints how to reach it, and runs it until the command's context ends or a
// daemon fails. operatorGiven says --operator was given, against which an
// existing data dir's mode is checked (site.SettleDataDirMode).
func runUp(cmd *cobra.Command, cfg localConfig, operatorGiven bool) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	var err error
	if cfg.Operator, err = site.SettleDataDirMode(cfg.DataDir, cfg.Operator, operatorGiven); err != nil {
		return err
	}
	upgraded, err := site.UpgradeDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	if len(upgraded) > 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "Upgraded the data dir from the first release (docs/upgrading.md):")
		for _, line := range upgraded {
			fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", line)
		}
	}
	logPath := filepath.Join(cfg.DataDir, "chiffon.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg.Log = newLogger(logFile)

	sc, err := localStack(cfg)
	if err != nil {
		return err
	}
	s, err := stack.Start(cmd.Context(), sc)
	if err != nil {
		return err
	}
	apiURL, remoteURL, err := upAPIURLs(s.APIURL(), cfg.Host)
	if err != nil {
		return errors.Join(err, s.Stop())
	}
	for file, u := range map[string]string{apiURLFile: apiURL, apiRemoteURLFile: remoteURL} {
		if err := os.WriteFile(filepath.Join(cfg.DataDir, file), []byte(u+"\n"), 0o644); err != nil {
			return errors.Join(err, s.Stop())
		}
	}
	out := cmd.OutOrStdout()
	upBanner{natsURL: s.NATSURL(), apiURL: apiURL, remoteURL: remoteURL, tls: sc.Orchestrator.HTTP.TLS.Enabled(),
		agents: sc.Agents, host: cfg.Host, dataDir: cfg.DataDir, logPath: logPath, operator: cfg.Operator}.print(out)
	stopOnSecondSignal := watchSignals(s)
	defer stopOnSecondSignal()
	select {
	case <-cmd.Context().Done():
		fmt.Fprintln(out, "stopping: agents drain (Ctrl-C again to cancel running work), stores close ...")
	case err = <-s.Err():
	}
	if err = errors.Join(err, s.Stop()); err == nil {
		fmt.Fprintln(out, "stopped")
	}
	return err
}

// watchSignals makes a second SIGINT or SIGTERM cancel the agents' running work at once;
// the first one ends the command's context (see main). The returned func stops watching.
func watchSignals(s *stack.Stack) (stop func()) {
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

// upAPIURLs are the API's URL for this host's clients (the one in api.url) and for
// other hosts, from the URL the stack serves on and up's --host: a wildcard
// address is reached at 127.0.0.1 here and at site.AdvertisedHost elsewhere.
func upAPIURLs(served, host string) (local, remote string, err error) {
	u, err := url.Parse(served)
	if err != nil {
		return "", "", err
	}
	if !site.IsWildcard(u.Hostname()) {
		return served, served, nil
	}
	port := u.Port()
	u.Host = net.JoinHostPort("127.0.0.1", port)
	local = u.String()
	u.Host = net.JoinHostPort(site.AdvertisedHost(host), port)
	return local, u.String(), nil
}

// upBanner is what `up` prints once its stack runs.
type upBanner struct {
	natsURL, apiURL string
	// remoteURL is the API's URL for other hosts; "" means apiURL.
	remoteURL string
	// tls says the API serves HTTPS with a certificate of the site CA.
	tls bool
	// operator says the site runs in NATS operator mode: hosts join it.
	operator bool
	agents   []stack.Agent
	// host is the address the broker and the API listen on.
	host             string
	dataDir, logPath string
}

// print prints what runs and the lines that point client commands at it from
// anywhere: the data dir's files on this host, the URL and token file elsewhere.
func (b upBanner) print(w io.Writer) {
	dataDir := b.dataDir
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	tokenFile := filepath.Join(dataDir, apiTokenFile)
	fmt.Fprintln(w, "Chiffon is up.")
	fmt.Fprintf(w, "  NATS broker    %s\n", b.natsURL)
	fmt.Fprintf(w, "  HTTP API       %s  (token in %s)\n", b.apiURL, tokenFile)
	fmt.Fprintf(w, "  dashboard      %s/  (sign in with that token; a viewer's is in %s)\n", b.apiURL,
		filepath.Join(dataDir, "secrets", site.ViewerToken))
	for _, a := range b.agents {
		fmt.Fprintf(w, "  agent %-8s %s  data %s\n", a.Config.Type, a.Config.ID, a.Config.DataDir)
	}
	fmt.Fprintf(w, "  logs           %s\n", b.logPath)
	fmt.Fprintln(w, "Try: chiffon submit --to desktop --work-type system_info --wait")
	fmt.Fprintf(w, "From another directory (or export %s=%s):\n", clientDataDirEnv, dataDir)
	fmt.Fprintf(w, "  chiffon agents --data-dir %s\n", dataDir)
	remoteURL := cmp.Or(b.remoteURL, b.apiURL)
	if b.tls {
		caFile := filepath.Join(dataDir, "secrets", site.CA)
		fmt.Fprintf(w, "From another host, with copies of the token file and the site CA (browsers: import %s):\n", caFile)
		fmt.Fprintf(w, "  chiffon agents --server %s --api-token-file %s --api-ca-file %s\n", remoteURL, tokenFile, caFile)
	} else {
		fmt.Fprintln(w, "From another host, with a copy of the token file:")
		fmt.Fprintf(w, "  chiffon agents --server %s --api-token-file %s\n", remoteURL, tokenFile)
	}
	if site.IsLoopback(b.host) {
		fmt.Fprintf(w, "  (the API listens on %s only: for other hosts, start up with --host and this host's address)\n", b.host)
	}
	b.printAddHost(w, dataDir)
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}
