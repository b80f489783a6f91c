// Package testnats starts embedded NATS servers for tests and connects to them the way
// the daemons do.
package testnats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// StoreDir is a JetStream store directory for the test, removed when the test
// ends. nats-server may still be deleting the files of a staged atomic batch for
// a moment after Shutdown returns, which t.TempDir's removal fails on; this one
// tries again for up to 10 s. Call it before Start, so that its removal comes
// after the server's shutdown.
func StoreDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "chiffon-jetstream-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove the JetStream store %s: %v", dir, err)
				return
			}
			time.Sleep(50 * time.Millisecond) // the server's own pace
		}
	})
	return dir
}

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

// ConnectWithInbox is Connect with the inbox prefix inbox, as a daemon of the
// identity whose prefix that is connects: the orchestrator answers an agent only
// there.
func ConnectWithInbox(t testing.TB, s *broker.Server, inbox string) *nats.Conn {
	t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, Name: t.Name(), InboxPrefix: inbox})
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// SecureServer is a server started by StartSecure, with what its clients need.
type SecureServer struct {
	*broker.Server
	// TLS trusts the server's certificate through the test's own CA.
	TLS broker.ClientTLS
	// ConfigFile is the server's nats-server config file; Restart with
	// broker.ServerConfig{ConfigFile: ConfigFile} starts the same server again.
	ConfigFile string
}

// StartSecure starts a server on a free port of 127.0.0.1 that accepts only users,
// each within its allow lists, over TLS with a CA and certificate made in a
// temporary directory. It shuts the server down when the test ends.
func StartSecure(t testing.TB, users []broker.User) *SecureServer {
	t.Helper()
	return startSecure(t, users, false)
}

// StartSecureJetStream is StartSecure with JetStream on, its store in a temporary
// directory.
func StartSecureJetStream(t testing.TB, users []broker.User) *SecureServer {
	t.Helper()
	return startSecure(t, users, true)
}

func startSecure(t testing.TB, users []broker.User, jetstream bool) *SecureServer {
	t.Helper()
	dir := t.TempDir()
	caFile, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatalf("test CA: %v", err)
	}
	cert, key, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatalf("test server certificate: %v", err)
	}
	conf := filepath.Join(dir, "nats-server.conf")
	err = broker.WriteServerFile(conf, broker.ServerFile{
		Listen: "127.0.0.1:-1",
		Users:  users,
		TLS:    &broker.ServerTLS{CertFile: cert, KeyFile: key},
	})
	if err != nil {
		t.Fatalf("write nats server config: %v", err)
	}
	cfg := broker.ServerConfig{ConfigFile: conf}
	if jetstream {
		cfg.JetStream, cfg.StoreDir = true, filepath.Join(dir, "jetstream")
	}
	s := Start(t, cfg)
	return &SecureServer{Server: s, TLS: broker.ClientTLS{CAFile: caFile}, ConfigFile: conf}
}

// NKey makes a user NKey seed file in a temporary directory and returns it with its
// public key, for a broker.User of StartSecure and a ConnectAs.
func NKey(t testing.TB) (seedFile, publicKey string) {
	t.Helper()
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	publicKey, err := broker.EnsureNKeySeed(seedFile)
	if err != nil {
		t.Fatalf("nkey: %v", err)
	}
	return seedFile, publicKey
}

// ConnectAs connects to s with broker.Connect as the user of seedFile, over TLS
// configured by tlsCfg, with inboxPrefix ("" for _INBOX), and closes the connection
// when the test ends.
func ConnectAs(t testing.TB, s *broker.Server, seedFile string, tlsCfg broker.ClientTLS, inboxPrefix string) *nats.Conn {
	t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{
		URLs: []string{s.ClientURL()}, Name: t.Name(),
		NKeyFile: seedFile, TLS: tlsCfg, InboxPrefix: inboxPrefix,
	})
	if err != nil {
		t.Fatalf("connect to nats as %s: %v", seedFile, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
