package broker_test

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats-server/v2/server"
)

// websocketServer starts a server from a ServerFile with TLS on its client port
// and a WebSocket listener on a free port of 127.0.0.1 with the same certificate;
// it returns the server and the site's CA.
func websocketServer(t *testing.T, users []broker.User) (*broker.Server, string) {
	t.Helper()
	dir := t.TempDir()
	ca, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles := &broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: ca}
	conf := filepath.Join(dir, "broker.conf")
	if err := broker.WriteServerFile(conf, broker.ServerFile{Listen: "127.0.0.1:-1", Users: users, TLS: tlsFiles,
		Websocket: &broker.WebsocketFile{Listen: "127.0.0.1:-1", TLS: tlsFiles}}); err != nil {
		t.Fatal(err)
	}
	return testnats.Start(t, broker.ServerConfig{ConfigFile: conf}), ca
}

// TestWebsocketTakesOnlyTheSitesIdentitiesWithinTheirAllowLists: over wss://
// with the site CA an agent's NKey connects and publishes and subscribes within
// its allow lists, and is refused outside them; a client without an identity, one
// with an unlisted NKey and one that does not trust the site CA are turned away
// at Connect.
func TestWebsocketTakesOnlyTheSitesIdentitiesWithinTheirAllowLists(t *testing.T) {
	agentSeed, agentPub := testnats.NKey(t)
	orchSeed, orchPub := testnats.NKey(t)
	stranger, _ := testnats.NKey(t)
	s, ca := websocketServer(t, []broker.User{
		{Name: "agent a-1", NKey: agentPub, Publish: []string{"chiffon.orch.*.task.a-1.>"}, Subscribe: []string{"chiffon.agent.a-1.work"}},
		{Name: "orchestrator", NKey: orchPub, Publish: []string{"chiffon.agent.*.work"}, Subscribe: []string{"chiffon.orch.*.task.>"}},
	})
	ws := s.WebsocketURL()
	if !strings.HasPrefix(ws, "wss://127.0.0.1:") {
		t.Fatalf("WebsocketURL %q, want wss:// on 127.0.0.1", ws)
	}
	site := broker.ClientTLS{CAFile: ca}
	agent, err := broker.Connect(broker.ConnConfig{URLs: []string{ws}, NKeyFile: agentSeed, TLS: site})
	if err != nil {
		t.Fatalf("agent over wss://: %v", err)
	}
	defer agent.Close()
	if _, err := agent.TLSConnectionState(); err != nil || !strings.HasPrefix(agent.ConnectedUrl(), "wss://") {
		t.Fatalf("agent connected to %s, TLS: %v", agent.ConnectedUrl(), err)
	}
	orch := testnats.ConnectAs(t, s, orchSeed, site, "") // the client port, for the other side
	work, err := agent.SubscribeSync("chiffon.agent.a-1.work")
	if err != nil {
		t.Fatal(err)
	}
	results, err := orch.SubscribeSync("chiffon.orch.o.task.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(agent, "chiffon.agent.a-1.work", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := orch.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := orch.Publish("chiffon.agent.a-1.work", []byte("job")); err != nil {
		t.Fatal(err)
	}
	if m, err := work.NextMsg(10 * time.Second); err != nil || string(m.Data) != "job" {
		t.Fatalf("work over wss://: %v", err)
	}
	if err := agent.Publish("chiffon.orch.o.task.a-1.r.status", []byte("done")); err != nil {
		t.Fatal(err)
	}
	if m, err := results.NextMsg(10 * time.Second); err != nil || string(m.Data) != "done" {
		t.Fatalf("status from wss://: %v", err)
	}
	errs := asyncErrors(agent)
	if err := agent.Publish("chiffon.agent.b-1.work", nil); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, errs, "chiffon.agent.b-1.work")

	websocketRefuses(t, ws, site, agentSeed, stranger)
}

// websocketRefuses checks that ws turns away, at Connect, a client without an
// identity and one with the unlisted NKey stranger (over TLS trusting site), and
// the agent's seed with another CA or the system's roots.
func websocketRefuses(t *testing.T, ws string, site broker.ClientTLS, agentSeed, stranger string) {
	t.Helper()
	otherCA, _, err := broker.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]broker.ConnConfig{
		"no identity":     {TLS: site},
		"an unlisted key": {NKeyFile: stranger, TLS: site},
		"another CA":      {NKeyFile: agentSeed, TLS: broker.ClientTLS{CAFile: otherCA}},
		"system roots":    {NKeyFile: agentSeed},
	} {
		cfg.URLs = []string{ws}
		nc, err := broker.Connect(cfg)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected over wss://", name)
			continue
		}
		// A refused identity comes as an authorization violation or, when the
		// server closed the connection first, as a close that names the identity.
		want := "certificate was not accepted"
		if cfg.TLS == site {
			want = "identity"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error about the %s", name, err, want)
		}
	}
}

// TestWebsocketBlockLoadsAsWritten: nats-server reads the block back with its
// listener, TLS, origin check and handshake bound, and no authentication of its
// own that would stand in for the file's users.
func TestWebsocketBlockLoadsAsWritten(t *testing.T) {
	dir := t.TempDir()
	ca, _, _ := broker.EnsureCA(dir)
	cert, key, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, pub := testnats.NKey(t)
	path := filepath.Join(dir, "broker.conf")
	err = broker.WriteServerFile(path, broker.ServerFile{Users: []broker.User{{NKey: pub}},
		TLS:       &broker.ServerTLS{CertFile: cert, KeyFile: key},
		Websocket: &broker.WebsocketFile{Listen: "0.0.0.0:8443", TLS: &broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: ca, Verify: true}}})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := opts.Websocket
	if w.Host != "0.0.0.0" || w.Port != 8443 || w.TLSConfig == nil || w.NoTLS || !w.SameOrigin || w.HandshakeTimeout != 10*time.Second {
		t.Fatalf("websocket %s:%d, TLS %v, no_tls %v, same_origin %v, handshake %s", w.Host, w.Port, w.TLSConfig != nil, w.NoTLS, w.SameOrigin, w.HandshakeTimeout)
	}
	if w.TLSConfig.ClientCAs == nil || w.TLSConfig.ClientAuth.String() != "RequireAndVerifyClientCert" {
		t.Fatalf("websocket TLS verifies client certificates: %v", w.TLSConfig.ClientAuth)
	}
	if w.Username != "" || w.Token != "" || w.NoAuthUser != "" || opts.NoAuthUser != "" || len(opts.Nkeys) != 1 {
		t.Fatalf("websocket auth of its own: user %q token %v no_auth_user %q", w.Username, w.Token != "", w.NoAuthUser)
	}
	if desc, err := broker.CheckServerFile(path); err != nil || !strings.Contains(desc, "WebSocket on 0.0.0.0:8443 with TLS") {
		t.Fatalf("config check: %q, %v", desc, err)
	}
}

// TestWebsocketWithoutTLSOnlyOnLoopback: a block without TLS is refused beyond
// loopback (and without no_tls anywhere), and on loopback serves ws:// to the
// file's users only.
func TestWebsocketWithoutTLSOnlyOnLoopback(t *testing.T) {
	seed, pub := testnats.NKey(t)
	users := []broker.User{{NKey: pub, Publish: []string{"ok"}}}
	tlsFiles := &broker.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem"}
	for name, w := range map[string]broker.WebsocketFile{
		"no TLS":               {Listen: "127.0.0.1:8443"},
		"no_tls on every host": {Listen: "0.0.0.0:8443", NoTLS: true},
		"no_tls on a LAN IP":   {Listen: "192.168.1.10:8443", NoTLS: true},
		"no_tls on no host":    {Listen: ":8443", NoTLS: true},
		"TLS and no_tls":       {Listen: "127.0.0.1:8443", NoTLS: true, TLS: tlsFiles},
		"TLS without a key":    {Listen: "127.0.0.1:8443", TLS: &broker.ServerTLS{CertFile: "/c.pem"}},
		"no port":              {Listen: "nas.lan", TLS: tlsFiles},
	} {
		path := filepath.Join(t.TempDir(), "broker.conf")
		if err := broker.WriteServerFile(path, broker.ServerFile{Users: users, Websocket: &w}); err == nil {
			t.Errorf("%s: written", name)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a file was left", name)
		}
	}

	path := filepath.Join(t.TempDir(), "broker.conf")
	if err := broker.WriteServerFile(path, broker.ServerFile{Listen: "127.0.0.1:-1", Users: users,
		Websocket: &broker.WebsocketFile{Listen: "127.0.0.1:-1", NoTLS: true}}); err != nil {
		t.Fatal(err)
	}
	s := testnats.Start(t, broker.ServerConfig{ConfigFile: path})
	if !strings.HasPrefix(s.WebsocketURL(), "ws://127.0.0.1:") || s.PlainWebsocketBeyondLoopback() {
		t.Fatalf("WebsocketURL %q", s.WebsocketURL())
	}
	if nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.WebsocketURL()}}); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected over ws://")
	} else if !strings.Contains(err.Error(), "identity") {
		t.Fatalf("anonymous over ws://: %v, want a refusal naming the identity", err)
	}
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.WebsocketURL()}, NKeyFile: seed})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

// TestConnectWarnsOfPlainWebsocketBeyondLoopback: a ws:// URL beyond loopback
// without TLS settings is known to be plain before any server answers.
func TestConnectWarnsOfPlainWebsocketBeyondLoopback(t *testing.T) {
	ip := nonLoopbackIPv4()
	if ip == "" {
		t.Skip("this machine has no address beyond loopback")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing answers there: Connect goes on retrying in the background
	var logs bytes.Buffer
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{"ws://" + net.JoinHostPort(ip, port)},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), NKeyFile: mustSeed(t)})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if !strings.Contains(logs.String(), "has no TLS") {
		t.Fatalf("no warning of plain WebSocket:\n%s", logs.String())
	}
}

func mustSeed(t *testing.T) string {
	seed, _ := testnats.NKey(t)
	return seed
}
