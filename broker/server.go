// Package broker runs an embedded NATS server, connects to NATS with the options a
// homelab daemon needs, builds every subject name and handles the bearer tokens that
// authenticate messages.
package broker

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded NATS server. The zero value listens on a random
// port on 127.0.0.1 without JetStream.
type ServerConfig struct {
	// Host is the address to listen on; "" means 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free one.
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
}

// Server is a running embedded NATS server.
type Server struct {
	ns   *server.Server
	opts *server.Options
}

// StartServer starts an embedded NATS server and waits until it accepts clients.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.JetStream && cfg.StoreDir == "" {
		return nil, errors.New("broker: JetStream needs an explicit store dir")
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		Host:       host,
		Port:       port,
		JetStream:  cfg.JetStream,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      !cfg.Debug,
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
		return nil, fmt.Errorf("broker: server on %s not ready after %s", net.JoinHostPort(host, strconv.Itoa(cfg.Port)), wait)
	}
	return &Server{ns: ns, opts: opts}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Port is the client port the server listens on.
func (s *Server) Port() int { return s.ns.Addr().(*net.TCPAddr).Port }

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
