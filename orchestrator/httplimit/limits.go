// Package httplimit bounds what the HTTP API's clients may hold open: the
// server's timeouts, a cap on its connections, and caps on the event streams per
// API token and in all, each refusal answered as the API's JSON error. It knows
// nothing of the orchestrator: the caller gives the handler to serve and, for the
// streams, how to name a request's token.
package httplimit

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Limits bounds what the API's clients may hold open. Without them (issue 26)
// anyone who reached the port kept connections open for good, idle or sending a
// body slowly, until the process ran out of files and every API call failed.
type Limits struct {
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

// Defaults of Limits.
const (
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultReadTimeout        = 30 * time.Second
	DefaultWriteTimeout       = 60 * time.Second
	DefaultIdleTimeout        = 60 * time.Second
	DefaultMaxConnections     = 1024
	DefaultMaxStreamsPerToken = 128
	DefaultMaxStreams         = 512
)

// limitRetryAfter is the Retry-After of an answer refused for a limit, in seconds.
const limitRetryAfter = 5

// WithDefaults returns l with each field left 0 set to its default.
func (l Limits) WithDefaults() Limits {
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
	defDur(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defDur(&l.ReadTimeout, DefaultReadTimeout)
	defDur(&l.WriteTimeout, DefaultWriteTimeout)
	defDur(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.MaxConnections, DefaultMaxConnections)
	def(&l.MaxStreamsPerToken, DefaultMaxStreamsPerToken)
	def(&l.MaxStreams, DefaultMaxStreams)
	return l
}

// Validate refuses a negative limit, naming its config key under http.limits.
func (l Limits) Validate() error {
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

// NewServer returns a server of h with l's timeouts, and ln capped at
// l.MaxConnections, to serve it on (over TLS when tlsConf is set); ctx is the
// base context of its requests. l is taken as it is: apply WithDefaults first.
func (l Limits) NewServer(ctx context.Context, ln net.Listener, h http.Handler, tlsConf *tls.Config) (*http.Server, net.Listener) {
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
