// Package broker runs an embedded NATS server, connects to NATS with the options a
// homelab daemon needs, builds every subject name and handles the bearer tokens that
// authenticate messages.
package broker

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded NATS server. The zero value listens on a random
// port on 127.0.0.1 without JetStream or authentication.
type ServerConfig struct {
	// ConfigFile is a nats-server config file (see WriteServerFile) to load; the
	// fields below then override it only where set. Without one the server has no
	// authentication.
	ConfigFile string
	// Host is the address to listen on; "" means the ConfigFile's or, without one,
	// 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free one, or with a ConfigFile keeps the
	// file's; -1 always picks a free one.
	Port int
	// JetStream enables JetStream, storing its data in StoreDir.
	JetStream bool
	// StoreDir is JetStream's store directory; required when JetStream is on.
	StoreDir string
	// MaxPayload is the largest message the server accepts, in bytes; 0 means NATS's
	// default of 1 MiB.
	MaxPayload int32
	// ReadyTimeout bounds how long Start waits for the server to accept clients; 0
	// means 10 s.
	ReadyTimeout time.Duration
	// Debug turns on the server's own logging to stderr.
	Debug bool
	// Name is the server's name, unique within its cluster; "" means the
	// ConfigFile's or one NATS makes up. JetStream in a cluster needs it, and the
	// same one across restarts.
	Name string
	// Cluster makes the server a node of a NATS cluster; its zero value keeps the
	// ConfigFile's cluster, or none.
	Cluster ClusterConfig
}

// ClusterConfig makes an embedded server a node of a NATS cluster: it listens for
// routes from the other nodes and connects to theirs. Fields left zero keep the
// ConfigFile's settings; without a ConfigFile the zero value means no cluster.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node; JetStream needs it.
	Name string
	// Host is the address the route port listens on; "" means the ConfigFile's
	// or, for a cluster the file does not have, ServerConfig's client Host.
	Host string
	// Port is the route port; 0 means the ConfigFile's or, when Name or Routes are
	// set, a free one; -1 always picks a free one.
	Port int
	// Routes are the route URLs of the other nodes, nats-route://host:port. A
	// node's own URL in the list is ignored, so every node can be given the same
	// list. JetStream in a cluster needs at least one.
	Routes []string
}

// apply sets cfg's fields on opts, which hold the ConfigFile's settings if any.
func (c ClusterConfig) apply(opts *server.Options) error {
	fromFile := opts.Cluster.Port != 0
	if c.Name != "" {
		opts.Cluster.Name = c.Name
	}
	if c.Host != "" {
		opts.Cluster.Host = c.Host
	}
	if c.Port != 0 {
		opts.Cluster.Port = c.Port
	}
	if len(c.Routes) > 0 {
		opts.Routes = make([]*url.URL, 0, len(c.Routes))
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return fmt.Errorf("broker: cluster route %q is not a URL like nats-route://host:port", r)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if opts.Cluster.Port == 0 && (c.Name != "" || len(c.Routes) > 0) {
		opts.Cluster.Port = server.RANDOM_PORT
	}
	if !fromFile && opts.Cluster.Port != 0 && opts.Cluster.Host == "" {
		opts.Cluster.Host = opts.Host
	}
	return nil
}

// Server is a running embedded NATS server.
type Server struct {
	ns   *server.Server
	opts *server.Options
}

// StartServer starts an embedded NATS server and waits until it accepts clients.
func StartServer(cfg ServerConfig) (*Server, error) {
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if cfg.Debug {
		ns.ConfigureLogger()
	}
	ns.Start()
	wait := cfg.ReadyTimeout
	if wait == 0 {
		wait = 10 * time.Second
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		return nil, fmt.Errorf("broker: server on %s not ready after %s", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), wait)
	}
	return &Server{ns: ns, opts: opts}, nil
}

// serverOptions builds the server's options from cfg and its config file, if any.
func serverOptions(cfg ServerConfig) (*server.Options, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT}
	if cfg.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("broker: config file: %w", err)
		}
	}
	if cfg.Host != "" {
		opts.Host = cfg.Host
	}
	if cfg.Port != 0 {
		opts.Port = cfg.Port
	}
	if cfg.MaxPayload != 0 {
		opts.MaxPayload = cfg.MaxPayload
	}
	if cfg.JetStream {
		opts.JetStream = true
	}
	if cfg.StoreDir != "" {
		opts.StoreDir = cfg.StoreDir
	}
	if opts.JetStream && opts.StoreDir == "" {
		return nil, errors.New("broker: JetStream needs an explicit store dir")
	}
	if cfg.Name != "" {
		opts.ServerName = cfg.Name
	}
	if err := cfg.Cluster.apply(opts); err != nil {
		return nil, err
	}
	opts.NoSigs = true
	opts.NoLog = !cfg.Debug
	return opts, nil
}

// ClientURL is the nats:// URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Port is the client port the server listens on.
func (s *Server) Port() int { return s.ns.Addr().(*net.TCPAddr).Port }

// Name is the server's name: ServerConfig.Name, the ConfigFile's or the one NATS
// made up.
func (s *Server) Name() string { return s.ns.Name() }

// ClusterURL is the nats-route:// URL the server listens on for routes from the
// other nodes of its cluster, or "" when it is in no cluster.
func (s *Server) ClusterURL() string {
	addr := s.ns.ClusterAddr()
	if addr == nil {
		return ""
	}
	return "nats-route://" + net.JoinHostPort(s.opts.Cluster.Host, strconv.Itoa(addr.Port))
}

// AuthRequired reports whether every client must authenticate: the server has users,
// NKey users, a token or trusted operators, and no no_auth_user that anonymous
// clients would become.
func (s *Server) AuthRequired() bool {
	o := s.opts
	auth := len(o.Nkeys) > 0 || len(o.Users) > 0 || len(o.TrustedOperators) > 0 ||
		o.Username != "" || o.Authorization != "" || o.AuthCallout != nil
	return auth && o.NoAuthUser == ""
}

// TLSRequired reports whether clients must use TLS.
func (s *Server) TLSRequired() bool { return s.opts.TLSConfig != nil && !s.opts.AllowNonTLS }

// MaxPayload is the largest message the server accepts.
func (s *Server) MaxPayload() int32 {
	if s.opts.MaxPayload == 0 {
		return server.MAX_PAYLOAD_SIZE
	}
	return s.opts.MaxPayload
}

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
