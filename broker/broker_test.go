package broker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSubjectsUseOnePrefix(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{broker.Subjects{}.AgentWork("a-1"), "chiffon.agent.a-1.work"},
		{broker.Subjects{}.AgentControl("a-1"), "chiffon.agent.a-1.control"},
		{broker.Subjects{}.OrchTask("o", "a-1", "t", "n"), "chiffon.orch.o.task.a-1.t.n"},
		{broker.Subjects{}.OrchTasks("o"), "chiffon.orch.o.task.>"},
		{broker.Subjects{Prefix: "lab"}.Register("a-1"), "lab.registry.register.a-1"},
		{broker.Subjects{}.Registers(), "chiffon.registry.register.*"},
		{broker.Subjects{}.Heartbeat("a-1"), "chiffon.registry.heartbeat.a-1"},
		{broker.Subjects{}.Heartbeats(), "chiffon.registry.heartbeat.*"},
		{broker.Subjects{}.ControlReplies("a-1"), "chiffon.inbox.orch.agent.a-1"},
		{broker.Subjects{}.ForwardReplies(), "chiffon.inbox.orch.fwd"},
		{broker.Subjects{}.StoreInbox(), "chiffon.inbox.store"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestTokensAreRandomAlphanumeric(t *testing.T) {
	a, b := broker.NewToken(), broker.NewToken()
	if len(a) != broker.TokenLen || a == b {
		t.Fatalf("tokens %q %q", a, b)
	}
	if strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Fatalf("token %q has other characters", a)
	}
}

func TestTokenFileRoundTripIsPrivateAndErrorsHideTheToken(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	tok := broker.NewToken()
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := broker.WriteTokenFile(p, tok); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if got, err := broker.ReadTokenFile(p); err != nil || got != tok {
		t.Fatalf("read %q %v", got, err)
	}
	_ = os.WriteFile(p, []byte(" \n"), 0o600)
	if _, err := broker.ReadTokenFile(p); err == nil || strings.Contains(err.Error(), tok) {
		t.Fatalf("empty file: %v", err)
	}
}

func TestCheckAuth(t *testing.T) {
	tok := broker.NewToken()
	msg := &nats.Msg{}
	if err := broker.CheckAuth(msg, tok); !errors.Is(err, broker.ErrNoToken) {
		t.Fatalf("no header: %v", err)
	}
	other := broker.NewToken()
	broker.SetAuth(msg, other, "a-1")
	if err := broker.CheckAuth(msg, tok); !errors.Is(err, broker.ErrBadToken) || strings.Contains(err.Error(), other) {
		t.Fatalf("bad token: %v", err)
	}
	broker.SetAuth(msg, tok, "a-1")
	if err := broker.CheckAuth(msg, tok); err != nil || broker.AgentIDOf(msg) != "a-1" {
		t.Fatalf("good token: %v %q", err, broker.AgentIDOf(msg))
	}
	if err := broker.CheckAuth(msg, ""); !errors.Is(err, broker.ErrBadToken) {
		t.Fatalf("empty expected token must not match: %v", err)
	}
}

// TestSharedAuthHeader sends several messages with one AuthHeader through a real
// server: each arrives with the token and agent id, and the header is unchanged.
func TestSharedAuthHeader(t *testing.T) {
	nc := testnats.Connect(t, testnats.Start(t, broker.ServerConfig{}))
	sub, err := nc.SubscribeSync("auth.test")
	if err != nil {
		t.Fatal(err)
	}
	tok := broker.NewToken()
	hdr := broker.AuthHeader(tok, "a-1")
	for i := range 3 {
		if err := nc.PublishMsg(&nats.Msg{Subject: "auth.test", Data: []byte{byte(i)}, Header: hdr}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := broker.CheckAuth(msg, tok); err != nil || broker.AgentIDOf(msg) != "a-1" {
			t.Fatalf("received %v: %v %q", msg.Header, err, broker.AgentIDOf(msg))
		}
	}
	var want nats.Msg
	broker.SetAuth(&want, tok, "a-1")
	if !reflect.DeepEqual(hdr, want.Header) {
		t.Fatalf("AuthHeader %v, SetAuth sets %v", hdr, want.Header)
	}
}

func TestServerRequiresStoreDirForJetStream(t *testing.T) {
	if _, err := broker.StartServer(broker.ServerConfig{JetStream: true}); err == nil {
		t.Fatal("JetStream without a store dir started")
	}
	s, err := broker.StartServer(broker.ServerConfig{JetStream: true, StoreDir: testnats.StoreDir(t), MaxPayload: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if s.MaxPayload() != 512<<10 || s.Port() == 0 {
		t.Fatalf("max payload %d, port %d", s.MaxPayload(), s.Port())
	}
}

func TestConnectReconnectsAfterServerRestart(t *testing.T) {
	s, err := broker.StartServer(broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	port := s.Port()
	reconnected := make(chan struct{}, 1)
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, Name: "t",
		OnReconnect: func(*nats.Conn) { reconnected <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s, err = broker.StartServer(broker.ServerConfig{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect")
	}
	if err := nc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("after reconnect: %v", err)
	}
}

func TestConnectNeedsAURL(t *testing.T) {
	if _, err := broker.Connect(broker.ConnConfig{}); err == nil {
		t.Fatal("no error without URLs")
	}
}

// TestConnectFailsAtStartWhenTheServerRefusesTheIdentity: a server that answers but
// does not list the NKey makes Connect fail at once, naming the seed file, instead
// of returning a connection that retries forever.
func TestConnectFailsAtStartWhenTheServerRefusesTheIdentity(t *testing.T) {
	_, pub := testnats.NKey(t)
	stranger, _ := testnats.NKey(t)
	s := testnats.StartSecure(t, []broker.User{{NKey: pub, Publish: []string{">"}}})
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, NKeyFile: stranger, TLS: s.TLS})
	if err == nil {
		nc.Close()
		t.Fatal("Connect returned a connection for an unlisted NKey")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") || !strings.Contains(err.Error(), stranger) {
		t.Fatalf("error %q should name the refusal and the seed file", err)
	}
}

// TestConnectFailsAtStartWhenTheServerCertificateIsNotTrusted covers the TLS
// handshakes that waiting will not fix.
func TestConnectFailsAtStartWhenTheServerCertificateIsNotTrusted(t *testing.T) {
	seed, pub := testnats.NKey(t)
	s := testnats.StartSecure(t, []broker.User{{NKey: pub, Publish: []string{">"}}})
	otherCA, _, err := broker.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tls  broker.ClientTLS
		want []string
	}{
		"another CA":       {broker.ClientTLS{CAFile: otherCA}, []string{"certificate", "unknown authority"}},
		"system roots":     {broker.ClientTLS{ServerName: "localhost"}, []string{"certificate", "unknown authority"}},
		"another name":     {broker.ClientTLS{CAFile: s.TLS.CAFile, ServerName: "nats.example"}, []string{"certificate", "nats.example"}},
		"trusted, for ref": {s.TLS, nil},
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, NKeyFile: seed, TLS: tc.tls})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				nc.Close()
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("Connect returned a connection")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestConnectFailsAtStartWithoutTheClientCertificateMutualTLSNeeds: a server that
// verifies client certificates turns away a client with none, at Connect.
func TestConnectFailsAtStartWithoutTheClientCertificateMutualTLSNeeds(t *testing.T) {
	dir := t.TempDir()
	caPath, _, _ := broker.EnsureCA(dir)
	cert, key, _ := broker.EnsureServerCert(dir, nil)
	clientCert, clientKey, err := broker.EnsureClientCert(dir, "desk-1")
	if err != nil {
		t.Fatal(err)
	}
	seed, pub := testnats.NKey(t)
	conf := filepath.Join(dir, "nats.conf")
	if err := broker.WriteServerFile(conf, broker.ServerFile{Listen: "127.0.0.1:-1", Users: []broker.User{{NKey: pub}},
		TLS: &broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: caPath, Verify: true}}); err != nil {
		t.Fatal(err)
	}
	s := testnats.Start(t, broker.ServerConfig{ConfigFile: conf})
	url := []string{s.ClientURL()}
	if nc, err := broker.Connect(broker.ConnConfig{URLs: url, NKeyFile: seed, TLS: broker.ClientTLS{CAFile: caPath}}); err == nil {
		nc.Close()
		t.Fatal("connected without a client certificate")
	} else if !strings.Contains(err.Error(), "tls") {
		t.Fatalf("error %q does not name TLS", err)
	} else {
		t.Log(err)
	}
	nc, err := broker.Connect(broker.ConnConfig{URLs: url, NKeyFile: seed,
		TLS: broker.ClientTLS{CAFile: caPath, CertFile: clientCert, KeyFile: clientKey}})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

// TestConnectFailsAtStartOnBadIdentitySettings needs no server: the files and the
// inbox prefix are checked before dialling, and no error quotes a seed.
func TestConnectFailsAtStartOnBadIdentitySettings(t *testing.T) {
	dir := t.TempDir()
	seed, _ := testnats.NKey(t)
	secret, _ := os.ReadFile(seed)
	notSeed := filepath.Join(dir, "not.nk")
	os.WriteFile(notSeed, secret[:20], 0o600)
	url := []string{"nats://127.0.0.1:1"}
	for name, tc := range map[string]struct {
		cfg  broker.ConnConfig
		want string
	}{
		"missing seed":         {broker.ConnConfig{NKeyFile: filepath.Join(dir, "absent.nk")}, "nkey_file"},
		"cut seed":             {broker.ConnConfig{NKeyFile: notSeed}, "nkey_file"},
		"seed and creds":       {broker.ConnConfig{NKeyFile: seed, CredsFile: seed}, "creds_file"},
		"cert without key":     {broker.ConnConfig{TLS: broker.ClientTLS{CertFile: seed}}, "tls.cert_file"},
		"CA with no cert":      {broker.ConnConfig{TLS: broker.ClientTLS{CAFile: seed}}, "tls.ca_file"},
		"wildcard inbox":       {broker.ConnConfig{InboxPrefix: "_INBOX.*"}, "inbox prefix"},
		"empty token in inbox": {broker.ConnConfig{InboxPrefix: "_INBOX..a"}, "inbox prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.URLs = url
			nc, err := broker.Connect(tc.cfg)
			if err == nil {
				nc.Close()
				t.Fatal("Connect returned a connection")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), string(secret[:12])) {
				t.Fatalf("error %q: want it to name %s and hold no seed", err, tc.want)
			}
		})
	}
}

// TestConnectWaitsForASecureServerNotYetStarted: with nothing listening yet Connect
// still returns a connection, which gets in as its NKey once the server starts.
func TestConnectWaitsForASecureServerNotYetStarted(t *testing.T) {
	seed, pub := testnats.NKey(t)
	s := testnats.StartSecure(t, []broker.User{{NKey: pub, Publish: []string{"x.>", "_I.>"}, Subscribe: []string{"x.>", "_I.>"}}})
	port := s.Port()
	s.Shutdown()
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, NKeyFile: seed, TLS: s.TLS, InboxPrefix: "_I"})
	if err != nil {
		t.Fatalf("server down: %v", err)
	}
	defer nc.Close()
	connected := nc.StatusChanged(nats.CONNECTED)
	if nc.IsConnected() {
		t.Fatal("connected with no server")
	}
	testnats.Start(t, broker.ServerConfig{ConfigFile: s.ConfigFile, Port: port})
	select {
	case <-connected:
	case <-time.After(20 * time.Second):
		t.Fatal("no connection after the server started")
	}
	sub, err := nc.Subscribe("x.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if m, err := nc.Request("x.echo", []byte("hi"), 10*time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("request through the custom inbox: %v", err)
	}
}

// TestServerAuthRequired tells an open server from one that needs an identity, and
// counts a no_auth_user, which anonymous clients become, as open.
func TestServerAuthRequired(t *testing.T) {
	_, pub := testnats.NKey(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.conf")
	if err := broker.WriteServerFile(users, broker.ServerFile{Listen: "127.0.0.1:-1", Users: []broker.User{{NKey: pub}}}); err != nil {
		t.Fatal(err)
	}
	noAuthUser := filepath.Join(dir, "no_auth_user.conf")
	if err := os.WriteFile(noAuthUser, []byte("listen: \"127.0.0.1:-1\"\nauthorization { users = [ {user: \"a\", password: \"b\"} ] }\nno_auth_user: \"a\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  broker.ServerConfig
		want bool
	}{
		{broker.ServerConfig{}, false},
		{broker.ServerConfig{ConfigFile: users}, true},
		{broker.ServerConfig{ConfigFile: noAuthUser}, false},
	} {
		s := testnats.Start(t, tc.cfg)
		if s.AuthRequired() != tc.want || s.TLSRequired() {
			t.Errorf("%s: auth required %v, TLS %v", tc.cfg.ConfigFile, s.AuthRequired(), s.TLSRequired())
		}
	}
}

// TestServerConfigFileIsOverriddenOnlyWhereSet: fields of ServerConfig left zero keep
// the file's settings; set ones win.
func TestServerConfigFileIsOverriddenOnlyWhereSet(t *testing.T) {
	_, pub := testnats.NKey(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := broker.WriteServerFile(conf, broker.ServerFile{Listen: "127.0.0.1:" + strconv.Itoa(port),
		Users: []broker.User{{NKey: pub}}, MaxPayload: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	s := testnats.Start(t, broker.ServerConfig{ConfigFile: conf})
	if s.Port() != port || s.MaxPayload() != 2<<20 || !s.AuthRequired() {
		t.Fatalf("file's settings lost: port %d (want %d), max payload %d", s.Port(), port, s.MaxPayload())
	}
	store := t.TempDir()
	o := testnats.Start(t, broker.ServerConfig{ConfigFile: conf, Port: -1, MaxPayload: 512 << 10, JetStream: true, StoreDir: store})
	if o.Port() == port || o.MaxPayload() != 512<<10 || !o.AuthRequired() {
		t.Fatalf("overrides lost: port %d, max payload %d", o.Port(), o.MaxPayload())
	}
	if _, err := broker.StartServer(broker.ServerConfig{ConfigFile: filepath.Join(t.TempDir(), "absent.conf")}); err == nil {
		t.Fatal("started without its config file")
	}
}

func TestParseTaskInboxTakesApartWhatOrchTaskBuilds(t *testing.T) {
	for _, prefix := range []string{"", "lab", "lab.site"} {
		s := broker.Subjects{Prefix: prefix}
		got, ok := broker.ParseTaskInbox(s.OrchTask("o-1", "code-1", "t-9", "n0nce"))
		if !ok || got != (broker.TaskInbox{AgentID: "code-1", TaskID: "t-9", Nonce: "n0nce"}) {
			t.Errorf("prefix %q: %+v %v", prefix, got, ok)
		}
	}
	for _, bad := range []string{"", "chiffon.orch.o.task.a.t", "chiffon.orch.o.tasks.a.t.n", "chiffon.orc.o.task.a.t.n",
		"orch.o.task.a.t.n", "chiffon.agent.a.work"} {
		if got, ok := broker.ParseTaskInbox(bad); ok {
			t.Errorf("%q parsed as %+v", bad, got)
		}
	}
}

// TestServerJoinsAClusterThroughItsRoutes: two servers given a cluster name, one
// with a route to the other, pass messages between their clients; a server
// without cluster settings listens for no routes, as before.
func TestServerJoinsAClusterThroughItsRoutes(t *testing.T) {
	alone := testnats.Start(t, broker.ServerConfig{})
	if alone.ClusterURL() != "" {
		t.Fatalf("a server without cluster settings listens for routes on %s", alone.ClusterURL())
	}
	a := testnats.Start(t, broker.ServerConfig{Name: "a", Cluster: broker.ClusterConfig{Name: "lab"}})
	if !strings.HasPrefix(a.ClusterURL(), "nats-route://127.0.0.1:") || a.Name() != "a" {
		t.Fatalf("name %q, cluster URL %q", a.Name(), a.ClusterURL())
	}
	b := testnats.Start(t, broker.ServerConfig{Name: "b", Cluster: broker.ClusterConfig{Name: "lab", Routes: []string{a.ClusterURL()}}})
	sub, err := testnats.Connect(t, a).SubscribeSync("over.the.route")
	if err != nil {
		t.Fatal(err)
	}
	pub := testnats.Connect(t, b)
	// The route and a's interest reach b a moment after the start: publish until
	// one message crosses.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := pub.Publish("over.the.route", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
			if string(m.Data) != "hi" {
				t.Fatalf("got %q", m.Data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no message crossed the route within 10s")
		}
	}
}

// TestServerRefusesABadClusterConfig: a route that is no URL, and JetStream in a
// cluster without a server name, fail at the start rather than after a timeout.
func TestServerRefusesABadClusterConfig(t *testing.T) {
	for name, cfg := range map[string]broker.ServerConfig{
		"bad route": {Cluster: broker.ClusterConfig{Name: "lab", Routes: []string{"127.0.0.1:6222"}}},
		"jetstream without a server name": {JetStream: true, StoreDir: testnats.StoreDir(t),
			Cluster: broker.ClusterConfig{Name: "lab", Routes: []string{"nats-route://127.0.0.1:1"}}},
	} {
		start := time.Now()
		s, err := broker.StartServer(cfg)
		if err == nil {
			s.Shutdown()
			t.Errorf("%s: started", name)
		} else if time.Since(start) > 5*time.Second {
			t.Errorf("%s: failed only after %s: %v", name, time.Since(start), err)
		}
	}
}

// TestLocalClusterFormsAndANodeRejoinsOnItsPorts: the cluster has a JetStream meta
// leader when StartLocalCluster returns; with the leader shut down the others
// elect another, and the node restarted on its client port rejoins.
func TestLocalClusterFormsAndANodeRejoinsOnItsPorts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	c, err := broker.StartLocalCluster(ctx, broker.LocalClusterConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("3 nodes formed in %s", time.Since(start))
	leader := c.MetaLeader()
	if c.Len() != 3 || leader < 0 || len(c.ClientURLs()) != 3 {
		t.Fatalf("%d nodes, meta leader %d, client URLs %v", c.Len(), leader, c.ClientURLs())
	}
	url := c.ClientURL(leader)
	start = time.Now()
	c.Shutdown(leader)
	if c.Node(leader) != nil {
		t.Fatal("a node shut down is still there")
	}
	if err := c.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("a new meta leader after %s", time.Since(start))
	if l := c.MetaLeader(); l == leader || l < 0 {
		t.Fatalf("meta leader %d with node %d down", l, leader)
	}
	start = time.Now()
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("rejoined after %s", time.Since(start))
	if got := c.Node(leader).ClientURL(); got != url {
		t.Fatalf("restarted on %s, was %s", got, url)
	}
}
