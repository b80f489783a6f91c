package broker_test

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestServerFileLoadsWithExactPermissions renders a file and loads it as nats-server
// does: every setting and every user's allow lists come back as written, and an
// empty list is a deny of everything, not nats-server's "no restriction".
func TestServerFileLoadsWithExactPermissions(t *testing.T) {
	dir := t.TempDir()
	caPath, _, _ := broker.EnsureCA(dir)
	cert, key, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, orch := testnats.NKey(t)
	_, agent := testnats.NKey(t)
	f := broker.ServerFile{
		Listen: "0.0.0.0:4333",
		Users: []broker.User{
			{Name: "orchestrator", NKey: orch, Publish: []string{"chiffon.agent.*.work", "_INBOX.>"}, Subscribe: []string{"chiffon.orch.o.task.>", "chiffon.registry.register q"}},
			{Name: "agent a-1", NKey: agent, Publish: []string{"chiffon.orch.*.task.a-1.>"}},
		},
		TLS:       &broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: caPath, Verify: true},
		JetStream: true, StoreDir: filepath.Join(dir, "js"),
		MaxPayload: 2 << 20,
	}
	path := filepath.Join(dir, "nats.conf")
	if err := broker.WriteServerFile(path, f); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o644)
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Host != "0.0.0.0" || opts.Port != 4333 || opts.MaxPayload != 2<<20 || !opts.JetStream || opts.StoreDir != f.StoreDir {
		t.Fatalf("listen %s:%d, max payload %d, jetstream %v %q", opts.Host, opts.Port, opts.MaxPayload, opts.JetStream, opts.StoreDir)
	}
	if opts.PingInterval != 20*time.Second || opts.MaxPingsOut != 3 {
		t.Fatalf("ping %v x %d, want 20s x 3", opts.PingInterval, opts.MaxPingsOut)
	}
	if opts.TLSConfig == nil || opts.TLSTimeout != 5 || opts.TLSConfig.ClientCAs == nil {
		t.Fatalf("TLS %v, timeout %v", opts.TLSConfig != nil, opts.TLSTimeout)
	}
	if len(opts.Users) != 0 || opts.NoAuthUser != "" || len(opts.Nkeys) != 2 {
		t.Fatalf("users %d, no_auth_user %q, nkeys %d", len(opts.Users), opts.NoAuthUser, len(opts.Nkeys))
	}
	want := map[string]*server.Permissions{
		orch:  {Publish: &server.SubjectPermission{Allow: f.Users[0].Publish}, Subscribe: &server.SubjectPermission{Allow: f.Users[0].Subscribe}},
		agent: {Publish: &server.SubjectPermission{Allow: f.Users[1].Publish}, Subscribe: &server.SubjectPermission{Deny: []string{">"}}},
	}
	for _, u := range opts.Nkeys {
		if !reflect.DeepEqual(u.Permissions, want[u.Nkey]) {
			t.Errorf("%s: permissions %+v %+v, want %+v %+v", u.Nkey, u.Permissions.Publish, u.Permissions.Subscribe, want[u.Nkey].Publish, want[u.Nkey].Subscribe)
		}
	}
}

// TestServerFileClusterLoadsAsWritten: a node's file loads as nats-server reads
// it: its name, JetStream, the cluster's name, route listener and routes, and
// route TLS that requires and verifies the other node's certificate.
func TestServerFileClusterLoadsAsWritten(t *testing.T) {
	dir := t.TempDir()
	caPath, _, _ := broker.EnsureCA(dir)
	cert, key, err := broker.EnsureNodeCert(dir, "broker-1", []string{"n1.lan"})
	if err != nil {
		t.Fatal(err)
	}
	_, pub := testnats.NKey(t)
	f := broker.ServerFile{Listen: "0.0.0.0:4222", Users: []broker.User{{NKey: pub}},
		ServerName: "broker-1", JetStream: true, StoreDir: filepath.Join(dir, "js"),
		Cluster: &broker.ClusterFile{Name: "chiffon", Listen: "0.0.0.0:6222", Advertise: "n1.lan:6222", NoAdvertise: true,
			Routes: []string{"nats-route://n2.lan:6222", "nats-route://n3.lan:6222"},
			TLS:    broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: caPath, Verify: true}}}
	path := filepath.Join(dir, "broker-1.conf")
	if err := broker.WriteServerFile(path, f); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := opts.Cluster
	if opts.ServerName != "broker-1" || !opts.JetStream || c.Name != "chiffon" || c.Host != "0.0.0.0" || c.Port != 6222 ||
		c.Advertise != "n1.lan:6222" || !c.NoAdvertise {
		t.Fatalf("server %q, jetstream %v, cluster %q on %s:%d, advertise %q, no_advertise %v",
			opts.ServerName, opts.JetStream, c.Name, c.Host, c.Port, c.Advertise, c.NoAdvertise)
	}
	if len(opts.Routes) != 2 || opts.Routes[0].Host != "n2.lan:6222" || opts.Routes[1].Host != "n3.lan:6222" {
		t.Fatalf("routes %v", opts.Routes)
	}
	if c.TLSConfig == nil || c.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert || c.TLSConfig.ClientCAs == nil || c.TLSTimeout != 5 {
		t.Fatalf("route TLS %+v, timeout %v: want client certificates required and verified", c.TLSConfig, c.TLSTimeout)
	}
}

// TestServerFileQuotesEveryString writes strings that would break or inject into
// an unquoted config and reads them back unchanged.
func TestServerFileQuotesEveryString(t *testing.T) {
	dir := t.TempDir()
	_, pub := testnats.NKey(t)
	store := filepath.Join(dir, `a "b" \c $HOME #d {e} f;g`+"\tz")
	f := broker.ServerFile{
		Users:     []broker.User{{Name: "x\n}\n]\nno_auth_user: \"x\"\n#", NKey: pub, Publish: []string{`a.$b`}, Subscribe: []string{"q.> group"}}},
		JetStream: true, StoreDir: store,
	}
	path := filepath.Join(dir, "nats.conf")
	if err := broker.WriteServerFile(path, f); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("%v\n%s", err, b)
	}
	if opts.StoreDir != store || opts.NoAuthUser != "" || len(opts.Nkeys) != 1 {
		t.Fatalf("store dir %q, no_auth_user %q, %d users", opts.StoreDir, opts.NoAuthUser, len(opts.Nkeys))
	}
	p := opts.Nkeys[0].Permissions
	if !reflect.DeepEqual(p.Publish.Allow, []string{`a.$b`}) || !reflect.DeepEqual(p.Subscribe.Allow, []string{"q.> group"}) {
		t.Fatalf("permissions %v %v", p.Publish.Allow, p.Subscribe.Allow)
	}
}

func TestServerFileRefusesAnOpenOrBrokenServer(t *testing.T) {
	_, pub := testnats.NKey(t)
	user := []broker.User{{NKey: pub}}
	nodeTLS := broker.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem", CAFile: "/ca.pem", Verify: true}
	routes := []string{"nats-route://n2:6222"}
	for name, f := range map[string]broker.ServerFile{
		"no users":               {},
		"not a user key":         {Users: []broker.User{{NKey: "ABCD"}}},
		"same key twice":         {Users: append(user, user...)},
		"empty subject":          {Users: []broker.User{{NKey: pub, Publish: []string{""}}}},
		"JetStream, no store":    {Users: user, JetStream: true},
		"TLS without key":        {Users: user, TLS: &broker.ServerTLS{CertFile: "/c.pem"}},
		"verify without a CA":    {Users: user, TLS: &broker.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem", Verify: true}},
		"subject with new line":  {Users: []broker.User{{NKey: pub, Subscribe: []string{"a\nb"}}}},
		"cluster, no name":       {Users: user, Cluster: &broker.ClusterFile{Listen: ":6222", Routes: routes, TLS: nodeTLS}},
		"cluster, no listen":     {Users: user, Cluster: &broker.ClusterFile{Name: "c", Routes: routes, TLS: nodeTLS}},
		"cluster without routes": {Users: user, Cluster: &broker.ClusterFile{Name: "c", Listen: ":6222", TLS: nodeTLS}},
		"cluster without TLS":    {Users: user, Cluster: &broker.ClusterFile{Name: "c", Listen: ":6222", Routes: routes}},
		"cluster, no CA": {Users: user, Cluster: &broker.ClusterFile{Name: "c", Listen: ":6222", Routes: routes,
			TLS: broker.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem", Verify: true}}},
		"cluster, routes unverified": {Users: user, Cluster: &broker.ClusterFile{Name: "c", Listen: ":6222", Routes: routes,
			TLS: broker.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem", CAFile: "/ca.pem"}}},
		"JetStream in a cluster, no server name": {Users: user, JetStream: true, StoreDir: "/js",
			Cluster: &broker.ClusterFile{Name: "c", Listen: ":6222", Routes: routes, TLS: nodeTLS}},
	} {
		path := filepath.Join(t.TempDir(), "nats.conf")
		if err := broker.WriteServerFile(path, f); err == nil {
			t.Errorf("%s: written", name)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a file was left", name)
		}
	}
}

// asyncErrors returns the connection's asynchronous errors, such as permission
// violations.
func asyncErrors(nc *nats.Conn) <-chan error {
	ch := make(chan error, 16)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case ch <- err:
		default:
		}
	})
	return ch
}

func waitViolation(t *testing.T, errs <-chan error, subject string) {
	t.Helper()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
			t.Fatalf("async error %v, want a permissions violation on %s", err, subject)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no permissions violation for %s", subject)
	}
}

// TestSecureServerAcceptsOnlyListedUsersWithinTheirAllowLists starts an embedded
// server from a rendered file: no anonymous client and no unlisted NKey gets in, a
// listed one does, and publishes and subscribes outside its lists are refused.
func TestSecureServerAcceptsOnlyListedUsersWithinTheirAllowLists(t *testing.T) {
	seedA, pubA := testnats.NKey(t)
	seedB, pubB := testnats.NKey(t)
	stranger, _ := testnats.NKey(t)
	s := testnats.StartSecure(t, []broker.User{
		{Name: "a", NKey: pubA, Publish: []string{"ok.>"}, Subscribe: []string{"ok.>"}},
		{Name: "b", NKey: pubB, Publish: []string{"ok.>"}},
	})
	if !s.AuthRequired() || !s.TLSRequired() {
		t.Fatalf("auth required %v, TLS required %v", s.AuthRequired(), s.TLSRequired())
	}
	url := []string{s.ClientURL()}
	if _, err := broker.Connect(broker.ConnConfig{URLs: url, TLS: s.TLS}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("anonymous client: %v", err)
	}
	if _, err := broker.Connect(broker.ConnConfig{URLs: url, TLS: s.TLS, NKeyFile: stranger}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("unlisted NKey: %v", err)
	}

	a := testnats.ConnectAs(t, s.Server, seedA, s.TLS, "")
	errs := asyncErrors(a)
	sub, err := a.SubscribeSync("ok.>")
	if err != nil {
		t.Fatal(err)
	}
	b := testnats.ConnectAs(t, s.Server, seedB, s.TLS, "")
	bErrs := asyncErrors(b)
	if err := b.Publish("ok.1", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("allowed publish not delivered: %v", err)
	}

	if err := a.Publish("other.1", nil); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, errs, "other.1")
	if _, err := a.SubscribeSync("other.>"); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, errs, "other.>")
	// b's subscribe list is empty: it may subscribe to nothing at all.
	if _, err := b.SubscribeSync("ok.>"); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, bErrs, "ok.>")
}

// TestConfirmSubscriptionReportsARefusedSubject: a daemon that subscribes where its
// identity may not (another daemon's NKey) learns it at once, not by silence.
func TestConfirmSubscriptionReportsARefusedSubject(t *testing.T) {
	seed, pub := testnats.NKey(t)
	srv := testnats.StartSecure(t, []broker.User{{NKey: pub, Publish: []string{"mine.>"}, Subscribe: []string{"mine.>"}}})
	nc := testnats.ConnectAs(t, srv.Server, seed, srv.TLS, "")
	if _, err := nc.SubscribeSync("mine.work"); err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(nc, "mine.work", 5*time.Second); err != nil {
		t.Fatalf("allowed subject: %v", err)
	}
	if _, err := nc.SubscribeSync("theirs.work"); err != nil {
		t.Fatal(err)
	}
	err := broker.ConfirmSubscription(nc, "theirs.work", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "theirs.work") {
		t.Fatalf("refused subject: %v, want an error naming it", err)
	}
}
