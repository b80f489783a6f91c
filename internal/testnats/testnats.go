// Package testnats starts embedded NATS servers for tests and connects to them the way
// the daemons do.
package testnats

import (
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// Start starts an embedded server on a free port (or cfg.Port) and shuts it down when
// the test ends.
func Start(t testing.TB, cfg broker.ServerConfig) *broker.Server {
	t.Helper()
	s, err := broker.StartServer(cfg)
	if err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Restart shuts s down and starts a new server on the same port, as a broker restart.
func Restart(t testing.TB, s *broker.Server, cfg broker.ServerConfig) *broker.Server {
	t.Helper()
	cfg.Port = s.Port()
	s.Shutdown()
	return Start(t, cfg)
}

// Connect connects to s with broker.Connect (reconnecting forever) and closes the
// connection when the test ends.
func Connect(t testing.TB, s *broker.Server) *nats.Conn {
	t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, Name: t.Name()})
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
