package orchestrator_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// limitedServer is an orchestrator served with HTTP limits on a real listener.
type limitedServer struct {
	t    *testing.T
	e    *env
	o    *orchestrator.Orchestrator
	addr string
	// tls is the client's TLS config over HTTPS; nil for plain HTTP.
	tls *tls.Config
}

// serveLimited opens an orchestrator with limits and serves it, over HTTPS when
// https is set.
func serveLimited(t *testing.T, limits orchestrator.HTTPLimits, https bool) *limitedServer {
	t.Helper()
	e := newEnv(t)
	e.cfg.HTTP.Limits = limits
	s := &limitedServer{t: t, e: e}
	if https {
		certFile, keyFile, ca := selfSigned(t, t.TempDir())
		e.cfg.HTTP.TLS = orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		s.tls = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}
	s.o = e.open()
	s.addr = serve(t, s.o)
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
		limits orchestrator.HTTPLimits
		// start makes the connection idle or stall.
		start func(t *testing.T, c net.Conn, br *bufio.Reader, token string)
	}{
		{"idle keep-alive after GET /livez",
			orchestrator.HTTPLimits{IdleTimeout: short, ReadHeaderTimeout: long, ReadTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, br *bufio.Reader, _ string) {
				if resp, err := get(c, br, "/livez"); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
					t.Fatalf("GET /livez: %v %v", resp, err)
				}
			}},
		{"slow headers",
			orchestrator.HTTPLimits{ReadHeaderTimeout: short, IdleTimeout: long, ReadTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader, _ string) {
				if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: chiffon\r\n"); err != nil {
					t.Fatal(err)
				}
			}},
		{"slow body",
			orchestrator.HTTPLimits{ReadTimeout: short, ReadHeaderTimeout: long, IdleTimeout: long, WriteTimeout: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader, token string) {
				head := "POST /api/v1/tasks HTTP/1.1\r\nHost: chiffon\r\nAuthorization: Bearer " + token +
					"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"to_agent\":"
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
					tc.start(t, conns[i], readers[i], s.e.cfg.APIToken)
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
		s := serveLimited(t, orchestrator.HTTPLimits{MaxConnections: limit}, https)
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
		s := serveLimited(t, orchestrator.HTTPLimits{MaxConnections: limit}, https)
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

// stream opens an event stream of path with token, and returns its status and
// headers once they come; a 200 stream stays open until the test ends or stop.
func stream(t *testing.T, c *client.Client, path, token string) (status int, retryAfter string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s: %v", path, err)
	}
	stop = func() { cancel(); resp.Body.Close() }
	t.Cleanup(stop)
	if resp.StatusCode != http.StatusOK {
		stop()
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), stop
}

// runningTaskAndBatch opens an orchestrator on e with a fake agent that holds a
// task and a batch's task running, and returns the paths of their event streams.
func runningTaskAndBatch(t *testing.T, e *env) (o *orchestrator.Orchestrator, taskEvents, batchEvents string) {
	t.Helper()
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = time.Minute, time.Minute // nothing ends on its own
	o, a := e.openWithAgent("code-1", 4)
	task := submit(t, o, nil)
	a.ack(a.next())
	b, err := o.CreateBatch(t.Context(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	a.ack(a.next())
	return o, "/api/v1/tasks/" + task.ID + "/events", "/api/v1/batches/" + b.ID + "/events"
}

// TestSSEStreamsArePerTokenAndInAllCapped: the event streams of one API token,
// of tasks and batches alike, are capped (429 with Retry-After), and so are all
// of them (503 with Retry-After); a stream that ends frees its place.
func TestSSEStreamsArePerTokenAndInAllCapped(t *testing.T) {
	e := newEnv(t, "code-1")
	viewer := broker.NewToken()
	e.cfg.APITokens = []orchestrator.APITokenConfig{{Name: "viewer", Role: orchestrator.RoleViewer, Token: viewer}}
	e.cfg.HTTP.Limits = orchestrator.HTTPLimits{MaxStreamsPerToken: 2, MaxStreams: 3}
	o, taskEvents, batchEvents := runningTaskAndBatch(t, e)
	c := e.client(o)
	op := e.cfg.APIToken

	status, _, stopFirst := stream(t, c, taskEvents, op)
	if status != http.StatusOK {
		t.Fatalf("first stream: HTTP %d", status)
	}
	steps := []struct {
		name, path, token string
		want              int
	}{
		{"operator's second, a batch's", batchEvents, op, http.StatusOK},
		{"operator's third: over its cap", taskEvents, op, http.StatusTooManyRequests},
		{"operator's third, a batch's: over its cap", batchEvents, op, http.StatusTooManyRequests},
		{"viewer's first: the last of all", batchEvents, viewer, http.StatusOK},
		{"viewer's second: over the cap of all", taskEvents, viewer, http.StatusServiceUnavailable},
	}
	for _, st := range steps {
		status, retryAfter, _ := stream(t, c, st.path, st.token)
		if status != st.want {
			t.Fatalf("%s: HTTP %d, want %d", st.name, status, st.want)
		}
		if status != http.StatusOK && retryAfter == "" {
			t.Fatalf("%s: HTTP %d without Retry-After", st.name, status)
		}
	}
	// The first stream ends: its place is the operator's again, once the server
	// sees it gone.
	stopFirst()
	deadline := time.Now().Add(wait)
	for {
		status, _, _ := stream(t, c, taskEvents, op)
		if status == http.StatusOK {
			break
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after a stream ended: HTTP %d", status)
		}
	}
}

// TestSSEStreamLivesPastTheServerTimeouts: an event stream keeps getting events
// long after the server's write and read timeouts, which end every other
// request, have passed.
func TestSSEStreamLivesPastTheServerTimeouts(t *testing.T) {
	for _, tc := range []struct{ name, proto string }{{"http", "HTTP/1.1"}, {"https", "HTTP/1.1"}, {"https h2", "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) { streamPastTimeouts(t, tc.name != "http", tc.proto) })
	}
}

// streamPastTimeouts is TestSSEStreamLivesPastTheServerTimeouts over HTTPS when
// https is set, with the protocol proto.
func streamPastTimeouts(t *testing.T, https bool, proto string) {
	{
		const timeout = 300 * time.Millisecond
		s := &limitedServer{t: t}
		s.e = newEnv(t, "code-1")
		s.e.cfg.Timeouts.Ack, s.e.cfg.Timeouts.Inactivity = time.Minute, time.Minute
		s.e.cfg.HTTP.Limits = orchestrator.HTTPLimits{WriteTimeout: timeout, ReadTimeout: timeout}
		hc := &http.Client{Transport: &http.Transport{}}
		scheme := "http"
		if https {
			certFile, keyFile, ca := selfSigned(t, t.TempDir())
			s.e.cfg.HTTP.TLS = orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: proto == "HTTP/2.0"}
			scheme = "https"
		}
		o, a := s.e.openWithAgent("code-1", 1)
		base := scheme + "://" + serve(t, o)
		defer hc.CloseIdleConnections()
		task := submit(t, o, nil)
		w := a.next()
		a.ack(w)

		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/tasks/"+task.ID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+s.e.cfg.APIToken)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Proto != proto {
			t.Fatalf("events: %v %v", resp, err)
		}
		defer resp.Body.Close()
		// The agent reports progress, each report larger than the server's write
		// buffers and further apart than the timeout, so that each write reaches
		// the connection on its own, long after the one before; the stream must
		// carry the reports sent after four timeouts have passed.
		events := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: status") && time.Since(start) > 4*timeout {
					events <- nil
					return
				}
			}
			events <- errors.Join(errors.New("stream ended"), sc.Err())
		}()
		tick := time.NewTicker(timeout * 3 / 2)
		output := strings.Repeat("x", 16<<10)
		defer tick.Stop()
		for step := int64(1); ; step++ {
			select {
			case err := <-events:
				if err != nil {
					t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
				}
				return
			case <-tick.C:
				a.status(w, 1, step, output, "", -1)
			case <-time.After(wait):
				t.Fatal("no event past the timeouts")
			}
		}
	}
}

// TestSSEStreamOfAClientThatStopsReadingEnds: a client that opens an event stream
// and stops reading holds its place only until a write has waited write_timeout:
// the stream ends, and its token may open another.
func TestSSEStreamOfAClientThatStopsReadingEnds(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = time.Minute, time.Minute
	e.cfg.HTTP.Limits = orchestrator.HTTPLimits{WriteTimeout: 300 * time.Millisecond, MaxStreamsPerToken: 1}
	o, a := e.openWithAgent("code-1", 1)
	base := "http://" + serve(t, o)
	task := submit(t, o, nil)
	w := a.next()
	a.ack(w)

	stalled, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), wait)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_ = stalled.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := io.WriteString(stalled, "GET /api/v1/tasks/"+task.ID+"/events HTTP/1.1\r\nHost: chiffon\r\nAuthorization: Bearer "+
		e.cfg.APIToken+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The agent reports large outputs, which fill the socket's buffers, until the
	// token's one place is free again.
	c := &client.Client{BaseURL: base, Token: e.cfg.APIToken, HTTP: &http.Client{}}
	output := strings.Repeat("x", 128<<10)
	deadline := time.Now().Add(wait)
	for step := int64(1); ; step++ {
		a.status(w, 1, step, output, "", -1)
		status, _, stop := stream(t, c, "/api/v1/tasks/"+task.ID+"/events", e.cfg.APIToken)
		if status == http.StatusOK {
			stop()
			return
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("second stream: HTTP %d", status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled client's stream still holds its place after %s", wait)
		}
	}
}
