package orchestrator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// HTTPLimits bounds what the API's clients may hold open. Without them (issue 26)
// anyone who reached the port kept connections open for good, idle or sending a
// body slowly, until the process ran out of files and every API call failed.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, its body included; 0 means 30 s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing an answer, from the end of its request's
	// headers; 0 means 60 s. An event stream lives on: each of its writes gets
	// WriteTimeout of its own.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request; 0 means 60 s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps the open connections; 0 means 1024. At the cap a new
	// connection closes the one idle longest; with none idle it is answered 503
	// (up to an eighth more of them, at least 8), and beyond that closed at once.
	MaxConnections int `yaml:"max_connections"`
	// MaxStreamsPerToken caps the event streams open with one API token (by its
	// name); 0 means 128, room for a script that follows many tasks at once
	// (chiffon bench follows 64). One more is answered 429.
	MaxStreamsPerToken int `yaml:"max_streams_per_token"`
	// MaxStreams caps the event streams open in all; 0 means 512, half of
	// MaxConnections' default. One more is answered 503.
	MaxStreams int `yaml:"max_streams"`
}

// Defaults of HTTPLimits.
const (
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPReadTimeout       = 30 * time.Second
	DefaultHTTPWriteTimeout      = 60 * time.Second
	DefaultHTTPIdleTimeout       = 60 * time.Second
	DefaultMaxConnections        = 1024
	DefaultMaxStreamsPerToken    = 128
	DefaultMaxStreams            = 512
)

// limitRetryAfter is the Retry-After of an answer refused for a limit, in seconds.
const limitRetryAfter = 5

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&l.ReadHeaderTimeout, DefaultHTTPReadHeaderTimeout)
	defDur(&l.ReadTimeout, DefaultHTTPReadTimeout)
	defDur(&l.WriteTimeout, DefaultHTTPWriteTimeout)
	defDur(&l.IdleTimeout, DefaultHTTPIdleTimeout)
	def(&l.MaxConnections, DefaultMaxConnections)
	def(&l.MaxStreamsPerToken, DefaultMaxStreamsPerToken)
	def(&l.MaxStreams, DefaultMaxStreams)
	return l
}

// validate names the offending key, under http.limits.
func (l HTTPLimits) validate() error {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"read_header_timeout", l.ReadHeaderTimeout}, {"read_timeout", l.ReadTimeout},
		{"write_timeout", l.WriteTimeout}, {"idle_timeout", l.IdleTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("config: http.limits.%s: must not be negative, got %s", d.key, d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"max_connections", l.MaxConnections}, {"max_streams_per_token", l.MaxStreamsPerToken},
		{"max_streams", l.MaxStreams},
	} {
		if n.v < 0 {
			return fmt.Errorf("config: http.limits.%s: must not be negative, got %d", n.key, n.v)
		}
	}
	return nil
}

// newServer returns the API's server with l's timeouts, and ln capped at
// l.MaxConnections, to serve it on (over TLS when tlsConf is set).
func (l HTTPLimits) newServer(ctx context.Context, ln net.Listener, h http.Handler, tlsConf *tls.Config) (*http.Server, net.Listener) {
	capped := newConnLimiter(ln, l.MaxConnections)
	srv := &http.Server{
		Handler:           refuseOverflow(h),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		TLSConfig:         tlsConf,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       capped.connContext,
		ConnState:         capped.trackState,
	}
	return srv, capped
}

// connLimiter is a listener that keeps at most max connections open. At the cap
// a new connection closes the one idle longest (the server tells which are idle,
// trackState); with none idle it comes in marked refused, for refuseOverflow to
// answer 503, and past overflow of those it is closed at once, so that the open
// files stay bounded whatever clients do.
type connLimiter struct {
	net.Listener
	max, overflow int

	mu      sync.Mutex
	open    int // connections served
	refused int // connections in only to be refused
	idle    map[*limitedConn]time.Time
}

func newConnLimiter(ln net.Listener, limit int) *connLimiter {
	return &connLimiter{Listener: ln, max: limit, overflow: max(8, limit/8), idle: map[*limitedConn]time.Time{}}
}

// limitedConn is a connection a connLimiter counts until it closes.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// refused marks a connection in past the cap: its requests get 503.
	refused bool
	// closed is set, under l.mu, once the connection no longer counts.
	closed bool
}

// Close closes the connection and frees its place.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// Accept returns the next connection that fits, closing those that do not.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
		_ = nc.Close()
	}
}

// admit counts nc in, making room by closing an idle connection when at the
// cap; it returns nil when nc must be closed.
func (l *connLimiter) admit(nc net.Conn) *limitedConn {
	if victim := l.evictable(); victim != nil {
		_ = victim.Close() // its place is free when Close returns
	}
	c := &limitedConn{Conn: nc, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open < l.max:
		l.open++
	case l.refused < l.overflow:
		l.refused++
		c.refused = true
	default:
		return nil
	}
	return c
}

// evictable is, at the cap, the connection idle longest, taken off the idle
// ones; nil below the cap or when none is idle.
func (l *connLimiter) evictable() *limitedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open < l.max {
		return nil
	}
	var oldest *limitedConn
	for c, since := range l.idle {
		if oldest == nil || since.Before(l.idle[oldest]) {
			oldest = c
		}
	}
	delete(l.idle, oldest)
	return oldest
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	delete(l.idle, c)
	if c.refused {
		l.refused--
	} else {
		l.open--
	}
}

// trackState is the server's ConnState hook: it keeps which connections wait
// idle between requests (over HTTP/2 too, whose server reports the same states).
func (l *connLimiter) trackState(nc net.Conn, state http.ConnState) {
	c := asLimited(nc)
	if c == nil || c.refused {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.closed:
	case state == http.StateIdle:
		l.idle[c] = time.Now()
	default:
		delete(l.idle, c)
	}
}

type refusedKey struct{}

// connContext is the server's ConnContext hook: it marks the requests of a
// connection in past the cap.
func (l *connLimiter) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c := asLimited(nc); c != nil && c.refused {
		return context.WithValue(ctx, refusedKey{}, true)
	}
	return ctx
}

// asLimited is the limitedConn under nc (a *tls.Conn over HTTPS), or nil.
func asLimited(nc net.Conn) *limitedConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, _ := nc.(*limitedConn)
	return c
}

// refuseOverflow answers each request of a connection in past the cap with 503
// and Retry-After, and closes the connection (over HTTP/2, with a GOAWAY).
func refuseOverflow(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused, _ := r.Context().Value(refusedKey{}).(bool); refused {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", strconv.Itoa(limitRetryAfter))
			writeError(w, http.StatusServiceUnavailable, "unavailable", "", "too many connections are open; try again")
			return
		}
		h.ServeHTTP(w, r)
	})
}
