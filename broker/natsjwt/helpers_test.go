package natsjwt_test

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deadline bounds every wait of these tests for a server's doing.
const deadline = 10 * time.Second

var (
	subj  = broker.Subjects{}
	orch  = broker.Identity{Role: broker.RoleOrchestrator}
	store = broker.Identity{Role: broker.RoleStore}
)

func agent(id string) broker.Identity { return broker.Identity{Role: broker.RoleAgent, Name: id} }

// testSite is a site in operator mode: its keys, an Authority over them, a CA
// and the certificates of its servers.
type testSite struct {
	dir  string
	site *natsjwt.Site
	auth *natsjwt.Authority
	tls  broker.ClientTLS
}

func newSite(t *testing.T) *testSite {
	t.Helper()
	dir := t.TempDir()
	site, err := natsjwt.EnsureSite(filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := natsjwt.LoadAuthority(site.Authority)
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &testSite{dir: dir, site: site, auth: auth, tls: broker.ClientTLS{CAFile: ca}}
}

// serverFile is a server's config in operator mode, with TLS, JetStream and the
// resolver in dirs of its own named name.
func (ts *testSite) serverFile(t *testing.T, name, listen string) broker.ServerFile {
	t.Helper()
	cert, key, err := broker.EnsureNodeCert(ts.dir, name, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return broker.ServerFile{
		Listen:    listen,
		Operator:  ts.site.ServerOperator(filepath.Join(ts.dir, name, "jwt")),
		TLS:       &broker.ServerTLS{CertFile: cert, KeyFile: key, CAFile: ts.tls.CAFile},
		JetStream: true, StoreDir: filepath.Join(ts.dir, name, "jetstream"), ServerName: name,
	}
}

// start writes f as name.conf and starts a server from it.
func (ts *testSite) start(t *testing.T, name string, f broker.ServerFile) (*broker.Server, broker.ServerConfig) {
	t.Helper()
	conf := filepath.Join(ts.dir, name+".conf")
	if err := broker.WriteServerFile(conf, f); err != nil {
		t.Fatal(err)
	}
	cfg := broker.ServerConfig{ConfigFile: conf}
	return testnats.Start(t, cfg), cfg
}

// startOne starts a single server and returns it with its config.
func (ts *testSite) startOne(t *testing.T) (*broker.Server, broker.ServerConfig) {
	t.Helper()
	return ts.start(t, "broker", ts.serverFile(t, "broker", "127.0.0.1:-1"))
}

// creds enrolls id with a new key, after the servers started, and returns its
// .creds file and public key.
func (ts *testSite) creds(t *testing.T, id broker.Identity) (string, string) {
	t.Helper()
	path := filepath.Join(ts.dir, "creds", natsjwt.IdentityName(id)+".creds")
	pub, err := natsjwt.EnsureCreds(path, func(userPub string) (string, error) {
		return ts.auth.IssueUser(subj, id, nil, userPub)
	})
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// client is a connection and what it reports.
type client struct {
	*nats.Conn
	disconnected chan error
	errs         chan error
}

// connect connects to urls with creds, reconnecting as a daemon does.
func (ts *testSite) connect(t *testing.T, urls []string, creds string) *client {
	t.Helper()
	c, err := ts.dial(urls, creds)
	if err != nil {
		t.Fatalf("connect with %s: %v", filepath.Base(creds), err)
	}
	t.Cleanup(c.Close)
	return c
}

func (ts *testSite) dial(urls []string, creds string) (*client, error) {
	c := &client{disconnected: make(chan error, 16), errs: make(chan error, 16)}
	nc, err := broker.Connect(broker.ConnConfig{URLs: urls, CredsFile: creds, TLS: ts.tls,
		OnDisconnect: func(_ *nats.Conn, err error) {
			select {
			case c.disconnected <- err:
			default:
			}
		}})
	if err != nil {
		return nil, err
	}
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case c.errs <- err:
		default:
		}
	})
	c.Conn = nc
	return c, nil
}

// system connects as the system user.
func (ts *testSite) system(t *testing.T, urls []string) *nats.Conn {
	t.Helper()
	nc, err := broker.Connect(ts.auth.SystemConnConfig(urls, ts.tls))
	if err != nil {
		t.Fatalf("connect as the system user: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// refused checks that a new connection with creds is refused.
func (ts *testSite) refused(t *testing.T, urls []string, creds string) {
	t.Helper()
	c, err := ts.dial(urls, creds)
	if err == nil {
		c.Close()
		t.Fatalf("%s connected", filepath.Base(creds))
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("%s: %v, want an authorization violation", filepath.Base(creds), err)
	}
}

// waitDisconnected waits for c to be cut off.
func waitDisconnected(t *testing.T, c *client, within time.Duration) {
	t.Helper()
	select {
	case <-c.disconnected:
	case <-time.After(within):
		t.Fatalf("still connected %s after the revocation", within)
	}
}

// stillConnected checks that c has not been cut off and the server answers it.
func stillConnected(t *testing.T, c *client) {
	t.Helper()
	if err := c.FlushTimeout(deadline); err != nil {
		t.Fatalf("a user not revoked: %v", err)
	}
	select {
	case err := <-c.disconnected:
		t.Fatalf("a user not revoked was disconnected: %v", err)
	default:
	}
}

// waitViolation waits for c's permission violation on subject.
func waitViolation(t *testing.T, c *client, subject string) {
	t.Helper()
	select {
	case err := <-c.errs:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
			t.Fatalf("async error %v, want a permissions violation on %s", err, subject)
		}
	case <-time.After(deadline):
		t.Fatalf("no permissions violation for %s", subject)
	}
}

// freePorts returns n ports of 127.0.0.1 free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
