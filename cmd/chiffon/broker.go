package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/cobra"
)

// brokerFlags are the flags of `chiffon broker`.
type brokerFlags struct {
	config    string
	listen    string
	jetstream bool
	storeDir  string
	insecure  bool
}

// openRisk is what an open broker beyond loopback exposes, for the refusal and the
// warning.
const openRisk = "anyone who can reach it can connect without an identity, read every message and send work to every agent"

// newBrokerCmd is `chiffon broker`, the broker daemon.
func newBrokerCmd() *cobra.Command {
	var f brokerFlags
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run an embedded NATS server until interrupted",
		Long: "Run an embedded NATS server until interrupted. With --config it loads a nats-server\n" +
			"config file, such as the one `chiffon init` writes, and --listen overrides its address.\n" +
			"Without one the server has no authentication, so it refuses to listen beyond loopback\n" +
			"unless --insecure is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBroker(cmd, f, cmd.Flags().Changed("listen"))
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "nats-server config file (users, TLS, JetStream), such as the one chiffon init writes")
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:4222", "address for NATS clients; with --config, overrides the file's only if given")
	cmd.Flags().BoolVar(&f.jetstream, "jetstream", false, "enable JetStream")
	cmd.Flags().StringVar(&f.storeDir, "store-dir", "", "JetStream store directory (required with --jetstream unless the config file sets one)")
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "allow a broker without authentication to listen beyond loopback")
	return cmd
}

// runBroker starts the broker, refusing an open one beyond loopback, and runs it
// until the command's context ends.
func runBroker(cmd *cobra.Command, f brokerFlags, listenGiven bool) error {
	cfg := broker.ServerConfig{ConfigFile: f.config, JetStream: f.jetstream, StoreDir: f.storeDir, Debug: rootLog.level == "debug"}
	if f.config == "" || listenGiven {
		host, port, err := parseListen(f.listen)
		if err != nil {
			return err
		}
		cfg.Host, cfg.Port = host, port
	}
	if f.config == "" && cfg.Host == "" {
		cfg.Host = "127.0.0.1" // what ":4222" has always meant here
	}
	if f.config == "" && f.jetstream && f.storeDir == "" {
		return usagef("--jetstream needs --store-dir")
	}
	if f.config == "" && !site.IsLoopback(cfg.Host) && !f.insecure {
		return refuseOpen(cfg.Host)
	}
	log := newLogger(cmd.ErrOrStderr())
	srv, err := broker.StartServer(cfg)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	// A config file may set no users either; the listener is checked once known.
	host := listenHost(srv.ClientURL())
	if !srv.AuthRequired() && !site.IsLoopback(host) {
		if !f.insecure {
			return refuseOpen(host)
		}
		log.Warn("broker has no authentication and listens beyond loopback: "+openRisk, "url", srv.ClientURL())
	} else if !srv.AuthRequired() {
		log.Warn("broker has no authentication: any process on this host can connect as any daemon and read every message, tokens included",
			"url", srv.ClientURL(), "fix", "run it with the broker.conf chiffon init writes (an NKey per daemon)")
	}
	if srv.PlainWebsocketBeyondLoopback() {
		return usagef(fmt.Sprintf("refusing to serve WebSocket without TLS on %s: every message, tokens included, "+
			"would cross the network in the clear; give the websocket block a tls block, or listen on 127.0.0.1 behind a proxy that ends TLS", srv.WebsocketURL()))
	}
	log.Info("broker listening", "url", srv.ClientURL(), "jetstream", f.jetstream,
		"auth", srv.AuthRequired(), "tls", srv.TLSRequired())
	if ws := srv.WebsocketURL(); ws != "" {
		log.Info("broker listening for WebSocket clients", "url", ws)
	}
	fmt.Fprintln(cmd.OutOrStdout(), srv.ClientURL())
	defer notifySystemd(cmd.Context(), log, nil)()
	<-cmd.Context().Done()
	log.Info("broker stopping")
	return nil
}

// parseListen splits --listen; port 0 asks for a free port, and an empty host
// means the default (127.0.0.1, or the config file's).
func parseListen(listen string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, usagef("--listen must be host:port: " + err.Error())
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, usagef("--listen port must be a number from 0 to 65535")
	}
	if port == 0 {
		port = -1 // StartServer's "free port" even with a config file
	}
	return host, port, nil
}

func refuseOpen(host string) error {
	return usagef(fmt.Sprintf("refusing to run a broker without authentication on %s: %s; "+
		"give --config with a nats-server config that lists users (chiffon init writes one), "+
		"listen on 127.0.0.1, or pass --insecure to accept the risk", host, openRisk))
}

// listenHost is the host of a server's client URL.
func listenHost(clientURL string) string {
	u, err := url.Parse(clientURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
