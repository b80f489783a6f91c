package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// User is one NATS identity in a broker's config file.
type User struct {
	// Name says who the user is; it is written as a comment only.
	Name string
	// NKey is the user's public NKey ("U...").
	NKey string
	// Publish and Subscribe are the subjects the user may publish and subscribe
	// to; all others are denied, and an empty list denies everything.
	Publish, Subscribe []string
}

// ServerTLS is the server side of TLS in a broker's config file. Give absolute paths:
// nats-server reads relative ones from its working directory.
type ServerTLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM).
	CertFile, KeyFile string
	// CAFile is the CA that client certificates must chain to; needed with Verify.
	CAFile string
	// Verify requires every client to show a certificate signed by CAFile (mutual
	// TLS).
	Verify bool
}

// ServerFile is what WriteServerFile writes: a nats-server config file that both a
// stock `nats-server -c FILE` and StartServer (ServerConfig.ConfigFile) load.
type ServerFile struct {
	// Listen is the client address, "host:port"; "" means nats-server's default
	// of 0.0.0.0:4222.
	Listen string
	// Users are the only identities the server accepts; there is no anonymous
	// user. At least one is required, unless Operator is set.
	Users []User
	// Operator, when set, runs the server in operator mode instead of with
	// Users: identities are user JWTs of the operator's accounts, learnt and
	// revoked while the server runs. Exclusive with Users.
	Operator *OperatorFile
	// TLS, when set, makes every client connection use TLS.
	TLS *ServerTLS
	// JetStream enables JetStream, storing its data in StoreDir.
	JetStream bool
	// StoreDir is JetStream's store directory; required when JetStream is on.
	StoreDir string
	// MaxPayload is the largest message accepted, in bytes; 0 means 1 MiB.
	MaxPayload int32
	// PingInterval is how often the server pings an idle client; 0 means 20 s.
	// A client that misses MaxPingsOut pings in a row is dropped with its
	// subscriptions, so a dead agent is gone within about a minute.
	PingInterval time.Duration
	// MaxPingsOut is how many unanswered pings drop a client; 0 means 3.
	MaxPingsOut int
	// ServerName names the server among the nodes of its cluster; JetStream in a
	// cluster requires it, the same across restarts.
	ServerName string
	// Cluster, when set, makes the server a node of a cluster.
	Cluster *ClusterFile
	// Websocket, when set, adds a WebSocket listener for the same users.
	Websocket *WebsocketFile
}

// ClusterFile is the cluster block of a broker's config file: the node listens
// for routes from the other nodes and connects to theirs, over TLS that both
// sides verify against the site CA, so that no server without a certificate of
// the site joins.
type ClusterFile struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Listen is the route address, "host:port".
	Listen string
	// Advertise is the route address, "host:port", the other nodes are told to
	// reach this one at; "" means nats-server's default, this host's IPs, which
	// the other nodes' TLS would check against a certificate that may name
	// only the host's name.
	Advertise string
	// NoAdvertise keeps the nodes from telling their clients the other nodes'
	// client addresses: clients use the URLs they are configured with, which
	// the certificates name, rather than the IPs a node listening on every
	// address would announce.
	NoAdvertise bool
	// Routes are the other nodes' route URLs, nats-route://host:port.
	Routes []string
	// TLS is the node's certificate (valid for server and client
	// authentication: a node dials the others too) and the CA; Verify must be
	// set.
	TLS ServerTLS
}

// Defaults of ServerFile.
const (
	defaultPingInterval = 20 * time.Second
	defaultMaxPingsOut  = 3
	// serverTLSTimeout is how long the server waits for a client's TLS handshake,
	// in seconds; nats-server's 2 s default is short for small hosts.
	serverTLSTimeout = 5
)

// WriteServerFile writes f to path as a nats-server config file with mode 0644. The
// file names key and certificate files but holds no secret.
func WriteServerFile(path string, f ServerFile) error {
	text, err := renderServerFile(f)
	if err != nil {
		return fmt.Errorf("server config %s: %w", path, err)
	}
	if err := replaceFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	return nil
}

// renderServerFile returns f in nats-server's config syntax.
func renderServerFile(f ServerFile) (string, error) {
	if err := f.check(); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# nats-server configuration written by Chiffon; `chiffon init` rewrites it.\n")
	if f.Listen != "" {
		fmt.Fprintf(&b, "listen: %s\n", quote(f.Listen))
	}
	if f.MaxPayload != 0 {
		fmt.Fprintf(&b, "max_payload: %d\n", f.MaxPayload)
	}
	ping, pingMax := f.PingInterval, f.MaxPingsOut
	if ping == 0 {
		ping = defaultPingInterval
	}
	if pingMax == 0 {
		pingMax = defaultMaxPingsOut
	}
	fmt.Fprintf(&b, "ping_interval: %s\nping_max: %d\n", quote(ping.String()), pingMax)
	if f.ServerName != "" {
		fmt.Fprintf(&b, "server_name: %s\n", quote(f.ServerName))
	}
	if t := f.TLS; t != nil {
		fmt.Fprintf(&b, "\ntls {\n  cert_file: %s\n  key_file: %s\n", quote(t.CertFile), quote(t.KeyFile))
		if t.CAFile != "" {
			fmt.Fprintf(&b, "  ca_file: %s\n", quote(t.CAFile))
		}
		fmt.Fprintf(&b, "  verify: %t\n  timeout: %d\n}\n", t.Verify, serverTLSTimeout)
	}
	if f.JetStream {
		fmt.Fprintf(&b, "\njetstream {\n  store_dir: %s\n}\n", quote(f.StoreDir))
	}
	if c := f.Cluster; c != nil {
		routes := make([]string, len(c.Routes))
		for i, r := range c.Routes {
			routes[i] = quote(r)
		}
		fmt.Fprintf(&b, "\n# Routes to the other nodes: TLS, each side verifying the other's certificate.\n")
		fmt.Fprintf(&b, "cluster {\n  name: %s\n  listen: %s\n", quote(c.Name), quote(c.Listen))
		if c.Advertise != "" {
			fmt.Fprintf(&b, "  advertise: %s\n", quote(c.Advertise))
		}
		if c.NoAdvertise {
			b.WriteString("  no_advertise: true\n")
		}
		fmt.Fprintf(&b, "  routes: [%s]\n", strings.Join(routes, ", "))
		fmt.Fprintf(&b, "  tls {\n    cert_file: %s\n    key_file: %s\n    ca_file: %s\n    verify: true\n    timeout: %d\n  }\n}\n",
			quote(c.TLS.CertFile), quote(c.TLS.KeyFile), quote(c.TLS.CAFile), serverTLSTimeout)
	}
	if f.Websocket != nil {
		f.Websocket.render(&b)
	}
	if f.Operator != nil {
		f.Operator.render(&b)
		return b.String(), nil
	}
	b.WriteString("\n# Every user has allow lists: whatever they do not name is denied.\nauthorization {\n  users = [\n")
	for _, u := range f.Users {
		fmt.Fprintf(&b, "    # %s\n    {\n      nkey: %s\n      permissions: {\n", commentText(u.Name), quote(u.NKey))
		fmt.Fprintf(&b, "        publish: %s\n        subscribe: %s\n      }\n    }\n", allowList(u.Publish), allowList(u.Subscribe))
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

// check refuses a file the server would reject or that would leave it open.
func (f ServerFile) check() error {
	var errs []error
	switch {
	case f.Operator != nil && len(f.Users) > 0:
		errs = append(errs, errors.New("users and an operator do not go together: an operator's users are JWTs"))
	case f.Operator != nil:
		errs = append(errs, f.Operator.check())
	case len(f.Users) == 0:
		// With no users nats-server needs no authentication at all.
		errs = append(errs, errors.New("at least one user is required"))
	}
	seen := map[string]bool{}
	for i, u := range f.Users {
		switch {
		case !nkeys.IsValidPublicUserKey(u.NKey):
			errs = append(errs, fmt.Errorf("user %d (%s): %q is not a public user NKey", i, u.Name, u.NKey))
		case seen[u.NKey]:
			errs = append(errs, fmt.Errorf("user %d (%s): NKey listed twice", i, u.Name))
		}
		seen[u.NKey] = true
		for _, s := range slices.Concat(u.Publish, u.Subscribe) {
			if s == "" || strings.ContainsAny(s, "\r\n\t") {
				errs = append(errs, fmt.Errorf("user %d (%s): subject %q is not valid", i, u.Name, s))
			}
		}
	}
	if f.TLS != nil && (f.TLS.CertFile == "" || f.TLS.KeyFile == "") {
		errs = append(errs, errors.New("TLS needs a cert file and a key file"))
	}
	if f.TLS != nil && f.TLS.Verify && f.TLS.CAFile == "" {
		errs = append(errs, errors.New("TLS verify needs a CA file"))
	}
	if f.JetStream && f.StoreDir == "" {
		errs = append(errs, errors.New("JetStream needs a store dir"))
	}
	if c := f.Cluster; c != nil {
		switch {
		case c.Name == "" || c.Listen == "" || len(c.Routes) == 0:
			errs = append(errs, errors.New("a cluster needs a name, a listen address and routes"))
		case c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == "" || !c.TLS.Verify:
			// Without TLS verified both ways any host that reaches the route port
			// joins the cluster and sees every message.
			errs = append(errs, errors.New("a cluster needs route TLS with a cert file, a key file, a CA file and verify"))
		}
		if f.JetStream && f.ServerName == "" {
			errs = append(errs, errors.New("JetStream in a cluster needs a server name"))
		}
	}
	if f.Websocket != nil {
		errs = append(errs, f.Websocket.check()...)
	}
	return errors.Join(errs...)
}

// allowList renders a subject permission. nats-server reads an empty allow list as
// no restriction at all, so an empty list is written as a deny of everything.
func allowList(subjects []string) string {
	if len(subjects) == 0 {
		return `{ deny: [">"] }`
	}
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = quote(s)
	}
	return "{ allow: [" + strings.Join(q, ", ") + "] }"
}

// quote returns s as a double-quoted string of nats-server's config syntax, whose
// only escapes are \t \n \r \" \\ and \xHH. Inside quotes "$" starts no variable.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// commentText makes s safe on one comment line.
func commentText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		return "(unnamed)"
	}
	return s
}
