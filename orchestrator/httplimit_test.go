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
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
)

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
	e.cfg.HTTP.Limits = httplimit.Limits{MaxStreamsPerToken: 2, MaxStreams: 3}
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
		e := newEnv(t, "code-1")
		e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = time.Minute, time.Minute
		e.cfg.HTTP.Limits = httplimit.Limits{WriteTimeout: timeout, ReadTimeout: timeout}
		hc := &http.Client{Transport: &http.Transport{}}
		scheme := "http"
		if https {
			certFile, keyFile, ca := selfSigned(t, t.TempDir())
			e.cfg.HTTP.TLS = orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: proto == "HTTP/2.0"}
			scheme = "https"
		}
		o, a := e.openWithAgent("code-1", 1)
		base := scheme + "://" + serve(t, o)
		defer hc.CloseIdleConnections()
		task := submit(t, o, nil)
		w := a.next()
		a.ack(w)

		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/tasks/"+task.ID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIToken)
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
	e.cfg.HTTP.Limits = httplimit.Limits{WriteTimeout: 300 * time.Millisecond, MaxStreamsPerToken: 1}
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
