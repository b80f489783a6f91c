package broker

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig configures a client connection. The zero value (with URLs set) reconnects
// forever with backoff from 100 ms up to 5 s, and buffers 8 MiB while disconnected.
type ConnConfig struct {
	// URLs are the NATS servers to use; several give failover within a cluster.
	URLs []string
	// Name is the connection name shown by the server's monitoring.
	Name string
	// ReconnectBufSize is how many bytes of outgoing messages are kept while
	// disconnected; 0 means 8 MiB.
	ReconnectBufSize int
	// MinReconnectWait and MaxReconnectWait bound the reconnect backoff; 0 means
	// 100 ms and 5 s.
	MinReconnectWait, MaxReconnectWait time.Duration
	// NKeyFile is a user NKey seed file to authenticate with; exclusive with
	// CredsFile; "" with both means no identity.
	NKeyFile string
	// CredsFile is a .creds file (user JWT and seed) for a server in operator
	// mode.
	CredsFile string
	// TLS configures TLS to the server; the zero value uses TLS only when the
	// server requires it, trusting the system's roots.
	TLS ClientTLS
	// InboxPrefix replaces "_INBOX" as the first tokens of request reply subjects,
	// so that subject permissions can give each identity inboxes of its own; it
	// must be a subject without wildcards. "" keeps "_INBOX".
	InboxPrefix string
	// OnReconnect runs after every reconnect, such as to register again.
	OnReconnect func(*nats.Conn)
	// OnDisconnect runs when the connection drops.
	OnDisconnect func(*nats.Conn, error)
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// Connect dials NATS. If no server answers yet it keeps trying in the background, so a
// daemon may start before its broker; publishes are buffered meanwhile. But a bad
// seed, creds or TLS file, a server refusing the identity and a failed TLS handshake
// are errors at once, naming the cause, rather than a reconnect loop. A connection
// beyond loopback without an identity or without TLS is logged as a warning at
// each Connect, saying what it leaves open.
func Connect(cfg ConnConfig) (*nats.Conn, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("broker: no NATS URL given")
	}
	ident, err := identityOptions(cfg)
	if err != nil {
		return nil, err
	}
	opts := append(connOptions(cfg), ident...)
	urls := strings.Join(cfg.URLs, ",")
	// A first attempt without retries tells an unreachable server, worth waiting
	// for, from one that answers but refuses us, which waiting will not fix.
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		if why := refusal(cfg, err); why != "" {
			return nil, fmt.Errorf("broker: %s: %w", why, err)
		}
		if nc, err = nats.Connect(urls, append(opts, nats.RetryOnFailedConnect(true))...); err != nil {
			return nil, err
		}
	}
	warnExposure(cfg, nc, cmp.Or(cfg.Logger, slog.Default()))
	return nc, nil
}

// identityOptions checks cfg's identity and TLS files and returns the options that
// present them.
func identityOptions(cfg ConnConfig) ([]nats.Option, error) {
	if err := checkIdentity("", cfg.NKeyFile, cfg.CredsFile, cfg.TLS); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var opts []nats.Option
	switch {
	case cfg.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("broker: nkey_file %s: not a user NKey seed", cfg.NKeyFile)
		}
		opts = append(opts, opt)
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if !cfg.TLS.isZero() {
		tc, err := cfg.TLS.config("tls.")
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		opts = append(opts, nats.Secure(tc))
	}
	if cfg.InboxPrefix != "" {
		if !validLiteralSubject(cfg.InboxPrefix) {
			return nil, fmt.Errorf("broker: inbox prefix %q must be a subject without wildcards", cfg.InboxPrefix)
		}
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	return opts, nil
}

// refusal says why a server that answered refused the connection, or "" when err
// may go away by waiting (no server reachable yet, a timeout).
func refusal(cfg ConnConfig, err error) string {
	var (
		unknownCA *x509.UnknownAuthorityError
		badName   *x509.HostnameError
		badCert   *x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		opErr     *net.OpError
	)
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		switch {
		case cfg.NKeyFile != "":
			return "the NATS server refused the identity in nkey_file " + cfg.NKeyFile
		case cfg.CredsFile != "":
			return "the NATS server refused the identity in creds_file " + cfg.CredsFile
		}
		return "the NATS server requires an identity (set nkey_file or creds_file)"
	case errors.Is(err, nats.ErrSecureConnWanted):
		return "TLS is configured but the NATS server does not offer it"
	case errors.As(err, &unknownCA), errors.As(err, &badName), errors.As(err, &badCert),
		errors.As(err, &verify):
		return "the NATS server's TLS certificate was not accepted (check tls.ca_file and tls.server_name)"
	case closedOverWebsocket(cfg.URLs, err):
		return websocketClosed(cfg)
	case errors.Is(err, nats.ErrTLS), errors.As(err, &opErr) && opErr.Op == "remote error":
		// The server ended the handshake with an alert, as when it wants a client
		// certificate it did not get or does not trust.
		return "TLS with the NATS server failed (check tls.cert_file and tls.key_file)"
	}
	return ""
}

// validLiteralSubject reports whether s is a NATS subject with no wildcard.
func validLiteralSubject(s string) bool {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// connOptions are the options every connection gets: reconnecting forever with
// backoff, buffering while disconnected and logging its events.
func connOptions(cfg ConnConfig) []nats.Option {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	buf := cfg.ReconnectBufSize
	if buf == 0 {
		buf = 8 << 20
	}
	minWait, maxWait := cfg.MinReconnectWait, cfg.MaxReconnectWait
	if minWait == 0 {
		minWait = 100 * time.Millisecond
	}
	if maxWait == 0 {
		maxWait = 5 * time.Second
	}
	return []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(buf),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return reconnectDelay(attempts, minWait, maxWait)
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
			if cfg.OnDisconnect != nil {
				cfg.OnDisconnect(nc, err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			if cfg.OnReconnect != nil {
				cfg.OnReconnect(nc)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats async error", "subject", subject, "err", err)
		}),
	}
}

// reconnectJitter is how far a reconnect delay may stray from its doubling step,
// either way.
const reconnectJitter = 0.2

// reconnectDelay doubles from min per attempt, capped at max, and then moves by up
// to ±20% (staying within min and max): the clients a broker restart cut off would
// otherwise all come back at the same instants.
func reconnectDelay(attempts int, minWait, maxWait time.Duration) time.Duration {
	d := minWait
	for i := 1; i < attempts && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	lo := max(time.Duration(float64(d)*(1-reconnectJitter)), minWait)
	hi := min(time.Duration(float64(d)*(1+reconnectJitter)), maxWait)
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

// ConfirmSubscription waits until the server has seen the subscriptions made so far
// on nc and reports its refusal of the one to subject: a subject the identity's
// allow lists do not name, as when a daemon runs with another identity's NKey. A
// server that cannot be reached within timeout is no refusal: nats.go subscribes
// again once it can.
func ConfirmSubscription(nc *nats.Conn, subject string, timeout time.Duration) error {
	if err := nc.FlushTimeout(timeout); err != nil {
		return nil
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
		return fmt.Errorf("the NATS server does not let this identity subscribe to %s (is nkey_file or creds_file the one made for this daemon?)", subject)
	}
	return nil
}
