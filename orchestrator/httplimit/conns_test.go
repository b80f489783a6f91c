package httplimit_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
)

// wait bounds what a test waits for.
const wait = 15 * time.Second

// selfSigned is a certificate for 127.0.0.1, and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chiffon test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: ca}, pool
}

// serveWith serves h on a free port through limits.NewServer (its zero fields
// defaulted), over HTTPS with a TLS 1.2 config, as the orchestrator's, when
// https is set, until the test ends. It returns the address and, over HTTPS,
// the client's TLS config.
func serveWith(t *testing.T, limits httplimit.Limits, https bool, h http.Handler) (addr string, clientTLS *tls.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var serverTLS *tls.Config
	if https {
		cert, pool := selfSigned(t)
		serverTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
		clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}
	srv, capped := limits.WithDefaults().NewServer(t.Context(), ln, h, serverTLS)
	done := make(chan error, 1)
	go func() {
		if https {
			done <- srv.ServeTLS(capped, "", "")
		} else {
			done <- srv.Serve(capped)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), clientTLS
}

// limitedServer is a server of /livez and POST /body (which reads the whole
// body) under HTTP limits, on a real listener.
type limitedServer struct {
	t    *testing.T
	addr string
	// tls is the client's TLS config over HTTPS; nil for plain HTTP.
	tls *tls.Config
}

// serveLimited serves with limits, over HTTPS when https is set.
func serveLimited(t *testing.T, limits httplimit.Limits, https bool) *limitedServer {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	s := &limitedServer{t: t}
	s.addr, s.tls = serveWith(t, limits, https, mux)
	return s
}

// dial opens a raw connection (after the TLS handshake over HTTPS); closed when
// the test ends.
func (s *limitedServer) dial() (net.Conn, error) {
	c, err := net.DialTimeout("tcp", s.addr, wait)
	if err != nil {
		return nil, err
	}
	s.t.Cleanup(func() { c.Close() })
	if s.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, s.tls.Clone())
	_ = tc.SetDeadline(time.Now().Add(wait))
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

func (s *limitedServer) mustDial() net.Conn {
	s.t.Helper()
	c, err := s.dial()
	if err != nil {
		s.t.Fatalf("dial: %v", err)
	}
	return c
}

// get sends GET path on c and reads the answer, within wait.
func get(c net.Conn, br *bufio.Reader, path string) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: chiffon\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedWithin reports whether the server closes c within d: nil when it has,
// else what the read got.
func closedWithin(c net.Conn, br *bufio.Reader, d time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, br)
	switch {
	case err == nil, errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF):
		return nil // EOF
	case errors.Is(err, os.ErrDeadlineExceeded):
		return err
	default:
		return nil // reset
	}
}

func schemes(t *testing.T, fn func(t *testing.T, https bool)) {
	t.Run("http", func(t *testing.T) { fn(t, false) })
	t.Run("https", func(t *testing.T) { fn(t, true) })
}

// TestIdleAndSlowConnectionsAreClosed: a keep-alive connection left idle after
// GET /livez, one that sends its headers slowly and one that sends its body
// slowly are each closed by the server within their own timeout (issue 26: they
// stayed open for good, until the process ran out of files). Every other timeout
// is longer than the bound the test waits, so only the one under test can close
// the connection in time.
func TestIdleAndSlowConnectionsAreClosed(t *testing.T) {
	const short, long = 200 * time.Millisecond, time.Minute
	bound := 5 * time.Second // well past short, well before long
	cases := []struct {
		name   string
		limits httplimit.Limits
		// start makes the connection idle or stall.
		start func(t *testing.T, c net.Conn, br *bufio.Reader)
	}{
		{"idle keep-alive after GET /livez",
			httplimit.Limits{IdleTimeout: short, ReadHeaderTimeout: long, ReadTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, br *bufio.Reader) {
				if resp, err := get(c, br, "/livez"); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
					t.Fatalf("GET /livez: %v %v", resp, err)
				}
			}},
		{"slow headers",
			httplimit.Limits{ReadHeaderTimeout: short, IdleTimeout: long, ReadTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: chiffon\r\n"); err != nil {
					t.Fatal(err)
				}
			}},
		{"slow body",
			httplimit.Limits{ReadTimeout: short, ReadHeaderTimeout: long, IdleTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				head := "POST /body HTTP/1.1\r\nHost: chiffon\r\n" +
					"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"to_agent\":"
				if _, err := io.WriteString(c, head); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			schemes(t, func(t *testing.T, https bool) {
				s := serveLimited(t, tc.limits, https)
				const n = 10
				conns := make([]net.Conn, n)
				readers := make([]*bufio.Reader, n)
				for i := range conns {
					conns[i] = s.mustDial()
					readers[i] = bufio.NewReader(conns[i])
					tc.start(t, conns[i], readers[i])
				}
				deadline := time.Now().Add(bound)
				for i, c := range conns {
					if err := closedWithin(c, readers[i], time.Until(deadline)); err != nil {
						t.Fatalf("connection %d still open %s after it stalled: %v", i, bound, err)
					}
				}
			})
		})
	}
}

// TestConnectionCapClosesAnIdleConnectionForANewcomer: with max_connections
// connections open and idle, a new client is still served: the server closes
// one idle connection to make room, and the others still work.
func TestConnectionCapClosesAnIdleConnectionForANewcomer(t *testing.T) {
	schemes(t, func(t *testing.T, https bool) {
		const limit = 4
		s := serveLimited(t, httplimit.Limits{MaxConnections: limit}, https)
		type idleConn struct {
			c  net.Conn
			br *bufio.Reader
		}
		idle := make([]idleConn, limit)
		for i := range idle {
			c := s.mustDial()
			idle[i] = idleConn{c, bufio.NewReader(c)}
			if resp, err := get(c, idle[i].br, "/livez"); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /livez on connection %d: %v %v", i, resp, err)
			}
		}
		// The server marks a connection idle once its answer is out: a newcomer that
		// comes before may be refused, with Retry-After, and tries again.
		deadline := time.Now().Add(wait)
		for served := false; !served; {
			if time.Now().After(deadline) {
				t.Fatalf("a newcomer was refused for %s with %d idle connections open", wait, limit)
			}
			c := s.mustDial()
			resp, err := get(c, bufio.NewReader(c), "/livez")
			switch {
			case err != nil:
				t.Fatalf("newcomer: %v", err)
			case resp.StatusCode == http.StatusOK:
				served = true
			case resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "":
				t.Fatalf("newcomer: HTTP %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			c.Close()
		}
		// Exactly one idle connection made room; the others still answer.
		closed := 0
		for i, ic := range idle {
			if resp, err := get(ic.c, ic.br, "/livez"); err != nil {
				closed++
			} else if resp.StatusCode != http.StatusOK {
				t.Errorf("connection %d: HTTP %d", i, resp.StatusCode)
			}
		}
		if closed != 1 {
			t.Fatalf("%d idle connections closed for one newcomer, want 1", closed)
		}
	})
}

// TestConnectionCapRefusesANewcomerWhenNoneIsIdle: with max_connections
// connections open and none idle (each sending its headers slowly), a newcomer
// is answered 503 with Retry-After and Connection: close, never left hanging;
// past the small overflow of such answers, a connection is closed at once, so the
// open files stay bounded.
func TestConnectionCapRefusesANewcomerWhenNoneIsIdle(t *testing.T) {
	schemes(t, func(t *testing.T, https bool) {
		const limit, overflow = 4, 8 // overflow: max(8, max/8)
		s := serveLimited(t, httplimit.Limits{MaxConnections: limit}, https)
		for range limit {
			c := s.mustDial()
			if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		c := s.mustDial()
		br := bufio.NewReader(c)
		resp, err := get(c, br, "/livez")
		if err != nil {
			t.Fatalf("newcomer: %v", err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !resp.Close {
			t.Fatalf("newcomer at the cap: HTTP %d, Retry-After %q, close %v; want 503 with Retry-After and Connection: close",
				resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
		}
		if err := closedWithin(c, br, wait); err != nil {
			t.Fatalf("refused connection left open: %v", err)
		}
		// Fill the overflow with silent connections; the next one is closed unanswered.
		for range overflow {
			if _, err := s.dial(); err != nil {
				break // closed at accept: the refused newcomer's place was not free yet
			}
		}
		extra, err := s.dial()
		if err != nil {
			return // closed during the TLS handshake
		}
		resp, err = get(extra, bufio.NewReader(extra), "/livez")
		if err == nil {
			t.Fatalf("past the overflow: HTTP %d, want the connection closed unanswered", resp.StatusCode)
		}
	})
}
