package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// haSiteDir runs `chiffon init --ha` for three nodes and three orchestrators on
// 127.0.0.1, on free ports, and returns the site's directory and the nodes' route
// addresses.
func haSiteDir(t *testing.T) (dir string, routes []string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "site")
	var clients, routeURLs []string
	for range 3 {
		clients = append(clients, "nats://127.0.0.1:"+strconv.Itoa(freePort(t)))
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		routes = append(routes, addr)
		routeURLs = append(routeURLs, "nats-route://"+addr)
	}
	code, out, errOut := runCLI(t, "", "init", "--ha", "--dir", dir, "--agents", "code", "--orchestrators", "3",
		"--nats", strings.Join(clients, ","), "--cluster-routes", strings.Join(routeURLs, ","),
		"--broker-listen", "127.0.0.1:4222", "--data-root", filepath.Join(root, "data"))
	if code != 0 {
		t.Fatalf("init --ha: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"broker-3.conf", "orchestrator-3.yaml", "broker-2:              broker-2.pem, broker-2-key.pem, ca.pem",
		"orchestrator-3:        orchestrator.nk"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	return dir, routes
}

// TestInitHAWritesAClusterThatForms starts the three nodes from the files init
// --ha wrote: they form a cluster over their verified routes, and the
// orchestrators' store identity makes its task stream there in 3 replicas, while
// neither an agent's identity nor the orchestrators' own may use the JetStream API.
func TestInitHAWritesAClusterThatForms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	dir, _ := haSiteDir(t)
	for i := 1; i <= 3; i++ {
		srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: filepath.Join(dir, fmt.Sprintf("broker-%d.conf", i))})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(srv.Shutdown)
	}
	orch, err := orchestrator.LoadConfig(filepath.Join(dir, "orchestrator-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	storeNC := connectAs(t, orch.StoreNATS(), broker.Identity{Role: broker.RoleStore})
	js, err := jetstream.New(storeNC)
	if err != nil {
		t.Fatal(err)
	}
	// The stream can be made once the three have elected JetStream's meta leader.
	deadline := time.Now().Add(60 * time.Second)
	var info *jetstream.StreamInfo
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "CHIFFON_TASKS", Subjects: []string{"chiffon.store.>"},
			Storage: jetstream.FileStorage, Replicas: 3})
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream of 3 replicas on the cluster within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if info.Config.Replicas != 3 || !strings.HasPrefix(info.Cluster.Leader, "broker-") {
		t.Fatalf("stream: %d replicas, leader %q", info.Config.Replicas, info.Cluster.Leader)
	}

	if msg, err := storeNC.Request("$JS.API.INFO", nil, 5*time.Second); err != nil || !strings.Contains(string(msg.Data), `"streams":1`) {
		t.Fatalf("the orchestrators' store's JetStream API request: %v", err)
	}
	ag, err := agent.LoadConfig(filepath.Join(dir, "agents", "code-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for who, nc := range map[string]*nats.Conn{
		"an agent":                          connectAs(t, ag.NATS, broker.Identity{Role: broker.RoleAgent, Name: "code-1"}),
		"the orchestrator's own connection": connectAs(t, orch.NATS, broker.Identity{Role: broker.RoleOrchestrator}),
	} {
		if _, err := nc.Request("$JS.API.INFO", nil, 2*time.Second); err == nil {
			t.Fatalf("%s used the JetStream API", who)
		} else if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("%s's JetStream API request: %v", who, err)
		}
	}
}

// connectAs connects with a daemon's nats section as id, with id's inbox.
func connectAs(t *testing.T, c broker.NATSConfig, id broker.Identity) *nats.Conn {
	t.Helper()
	cc := c.ConnConfig(t.Name())
	cc.InboxPrefix = broker.Subjects{}.InboxOf(id)
	nc, err := broker.Connect(cc)
	if err != nil {
		t.Fatalf("connect as %s: %v", id.Role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestInitHARoutesRefuseAServerWithoutTheSiteCertificate: a node's route port
// ends the TLS handshake of a peer that shows no certificate, or one of another
// CA, so that no server outside the site joins the cluster.
func TestInitHARoutesRefuseAServerWithoutTheSiteCertificate(t *testing.T) {
	dir, routes := haSiteDir(t)
	srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: filepath.Join(dir, "broker-1.conf")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	pool, err := broker.LoadCertPool(filepath.Join(dir, "secrets", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, _, err := broker.EnsureCA(other); err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, err := broker.EnsureNodeCert(other, "broker-9", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.LoadX509KeyPair(foreignCert, foreignKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's": {foreign}} {
		err := routeHandshake(t, routes[0], &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: certs})
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: the route port answered %v, want the handshake refused for the certificate", name, err)
		}
	}
}

// routeHandshake speaks to a route port as a joining server does: TLS first,
// then it reads what the server sends (its INFO). It
// returns the error that ends the read: a server that refuses the peer's
// certificate sends a TLS alert.
func routeHandshake(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	_, err = tc.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the route port waited for the peer's CONNECT: it took the certificate")
	}
	return err
}

// TestInitHAOrchestratorsFormAGroup: each orchestrator config loads and
// validates as a member of one group: the same id and NATS identity, the tasks
// in JetStream on 3 replicas, its own data dir and advertised API address on its
// host, every node's URL; the API's certificate names every orchestrator's host
// as well as --api-host, and each node's certificate its own host only, for
// both ends of a route.
func TestInitHAOrchestratorsFormAGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--ha", "--dir", dir, "--agents", "code", "--orchestrators", "3",
		"--nats", "nats://n1.lan:4222,nats://n2.lan:4222,nats://n3.lan:4222", "--orchestrator-host", "o1.lan,o2.lan,o3.lan",
		"--listen", "0.0.0.0:8080", "--api-host", "chiffon.lan", "--data-root", "/srv/chiffon")
	if code != 0 {
		t.Fatalf("init --ha: exit %d: %s", code, errOut)
	}
	pool, err := broker.LoadCertPool(filepath.Join(dir, "secrets", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	api := readPEMCert(t, filepath.Join(dir, "secrets", "api.pem"))
	if _, err := api.Verify(x509.VerifyOptions{Roots: pool, DNSName: "chiffon.lan"}); err != nil {
		t.Errorf("the API's certificate for --api-host: %v", err)
	}
	for i := 1; i <= 3; i++ {
		c, err := orchestrator.LoadConfig(filepath.Join(dir, fmt.Sprintf("orchestrator-%d.yaml", i)))
		if err != nil {
			t.Fatalf("orchestrator-%d.yaml: %v", i, err)
		}
		if c.ID != "main" || !c.HA.Enabled || c.HA.Lease != orchestrator.DefaultLease || c.Store.Kind != orchestrator.StoreJetStream ||
			c.Store.JetStream.Replicas != 3 || len(c.Agents) != 1 || c.HTTP.TLS.CertFile == "" ||
			!slices.Equal(c.NATS.URLs, []string{"nats://n1.lan:4222", "nats://n2.lan:4222", "nats://n3.lan:4222"}) {
			t.Errorf("orchestrator-%d: id %q, ha %+v, store %+v, nats %v, http %+v, %d agents", i, c.ID, c.HA, c.Store, c.NATS.URLs, c.HTTP, len(c.Agents))
		}
		if !strings.HasSuffix(c.NATS.NKeyFile, "orchestrator.nk") || !strings.HasSuffix(c.StoreNATS().NKeyFile, "orchestrator-store.nk") {
			t.Errorf("orchestrator-%d's identities: %s, store %s", i, c.NATS.NKeyFile, c.StoreNATS().NKeyFile)
		}
		host := fmt.Sprintf("o%d.lan", i)
		if want := "https://" + host + ":8080"; c.HA.AdvertiseURL != want || !strings.Contains(out, want) {
			t.Errorf("orchestrator-%d advertises %q, want %s in its config and the summary", i, c.HA.AdvertiseURL, want)
		}
		if want := fmt.Sprintf("/srv/chiffon/orchestrator-%d", i); c.DataDir != want {
			t.Errorf("orchestrator-%d's data dir %s, want %s", i, c.DataDir, want)
		}
		if _, err := api.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("the API's certificate on %s: %v", host, err)
		}

		node := fmt.Sprintf("broker-%d", i)
		cert := readPEMCert(t, filepath.Join(dir, "secrets", node+".pem"))
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: fmt.Sprintf("n%d.lan", i), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s's certificate for usage %v: %v", node, usage, err)
			}
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: fmt.Sprintf("n%d.lan", i%3+1)}); err == nil {
			t.Errorf("%s's certificate is valid for another node's host", node)
		}
	}
	ag, err := agent.LoadConfig(filepath.Join(dir, "agents", "code-1.yaml"))
	if err != nil || len(ag.NATS.URLs) != 3 {
		t.Errorf("agent: %v, urls %v", err, ag.NATS.URLs)
	}
}

// TestInitHANodeFilesLoadAsAClusterOfThree: node N's file, as nats-server reads
// it, listens on the port of --nats URL N and on its route port, routes to the
// two other nodes, advertises its route URL's host and keeps JetStream under
// --data-root.
func TestInitHANodeFilesLoadAsAClusterOfThree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, _, errOut := runCLI(t, "", "init", "--ha", "--dir", dir, "--agents", "code",
		"--nats", "nats://n1.lan:4222,nats://n2.lan:4223,nats://n3.lan:4224", "--broker-listen", "10.0.0.9:4222",
		"--data-root", "/srv/chiffon")
	if code != 0 {
		t.Fatalf("init --ha: exit %d: %s", code, errOut)
	}
	for i := 1; i <= 3; i++ {
		node := fmt.Sprintf("broker-%d", i)
		opts, err := server.ProcessConfigFile(filepath.Join(dir, node+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		var routes []string
		for _, r := range opts.Routes {
			routes = append(routes, r.Host)
		}
		wantRoutes := []string{fmt.Sprintf("n%d.lan:6222", (i)%3+1), fmt.Sprintf("n%d.lan:6222", (i+1)%3+1)}
		slices.Sort(wantRoutes)
		c := opts.Cluster
		if opts.ServerName != node || opts.Host != "10.0.0.9" || opts.Port != 4221+i || !opts.JetStream ||
			opts.StoreDir != "/srv/chiffon/"+node+"/jetstream" || c.Name != "chiffon" || c.Host != "10.0.0.9" || c.Port != 6222 ||
			c.Advertise != fmt.Sprintf("n%d.lan:6222", i) || !c.NoAdvertise || !slices.Equal(slices.Sorted(slices.Values(routes)), wantRoutes) {
			t.Errorf("%s: name %q, clients %s:%d, jetstream %v in %s, cluster %q on %s:%d advertising %q (no_advertise %v), routes %v",
				node, opts.ServerName, opts.Host, opts.Port, opts.JetStream, opts.StoreDir, c.Name, c.Host, c.Port, c.Advertise, c.NoAdvertise, routes)
		}
		if c.TLSConfig == nil || c.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
			t.Errorf("%s: routes do not verify the peer's certificate", node)
		}
	}
}

// readPEMCert reads a certificate file.
func readPEMCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInitHARefusesWhatItCannotWrite: --ha needs three URLs and two or three
// orchestrators, and its flags need --ha.
func TestInitHARefusesWhatItCannotWrite(t *testing.T) {
	three := "nats://a:4222,nats://b:4222,nats://c:4222"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ha", "--nats", "nats://a:4222,nats://b:4222"}, "needs 3 --nats URLs"},
		{[]string{"--ha", "--nats", three, "--orchestrators", "4"}, "--orchestrators must be 2 or 3"},
		{[]string{"--ha", "--nats", three, "--cluster-routes", "nats-route://a:6222"}, "--cluster-routes needs 3 URLs"},
		{[]string{"--ha", "--nats", three, "--orchestrator-host", "a"}, "--orchestrator-host needs 2 hosts"},
		{[]string{"--ha", "--nats", three, "--broker-host", "a"}, "--broker-host does not go with --ha"},
		{[]string{"--orchestrators", "3"}, "--orchestrators needs --ha"},
		{[]string{"--cluster-routes", "nats-route://a:6222"}, "--cluster-routes needs --ha"},
		{[]string{"--orchestrator-host", "a"}, "--orchestrator-host needs --ha"},
	} {
		dir := filepath.Join(t.TempDir(), "site")
		code, _, errOut := runCLI(t, "", append([]string{"init", "--dir", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("init %v: exit %d, %q; want a usage error (2) with %q", tc.args, code, errOut, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("init %v wrote %s", tc.args, dir)
		}
	}
}
