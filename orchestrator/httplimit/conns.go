package httplimit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

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
			api.WriteError(w, http.StatusServiceUnavailable, "unavailable", "", "too many connections are open; try again")
			return
		}
		h.ServeHTTP(w, r)
	})
}
