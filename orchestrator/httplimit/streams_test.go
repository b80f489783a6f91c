package httplimit_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
)

// tokenOf names a request's token as the test's caller does: by a header.
func tokenOf(r *http.Request) string { return r.Header.Get("X-Token") }

// streamServer serves an event stream at / through a StreamLimiter: it sends
// its headers and a first event, then what arrives on events, until the client
// goes.
func streamServer(t *testing.T, limits httplimit.Limits, events <-chan string) string {
	t.Helper()
	limits = limits.WithDefaults()
	streams := httplimit.NewStreamLimiter(limits, tokenOf)
	h := streams.Stream(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(data string) bool {
			_, err := io.WriteString(w, "data: "+data+"\n\n")
			return err == nil && rc.Flush() == nil
		}
		if !send("open") {
			return
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case e := <-events:
				if !send(e) {
					return
				}
			}
		}
	})
	addr, _ := serveWith(t, limits, false, h)
	return "http://" + addr + "/"
}

// openStream opens the stream at url as token and returns its status, its
// Retry-After and error body (when refused) and, open, its stop.
func openStream(t *testing.T, url, token string) (status int, retryAfter string, body api.ErrorBody, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("X-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream of %s: %v", token, err)
	}
	stop = func() { cancel(); resp.Body.Close() }
	t.Cleanup(stop)
	if resp.StatusCode != http.StatusOK {
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("refusal of HTTP %d as %q, want application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Errorf("refusal of HTTP %d: %v", resp.StatusCode, err)
		}
		stop()
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), body, stop
}

// TestStreamsArePerTokenAndInAllCapped: the streams of one token, as the caller
// names it, are capped (429 too_many_streams with Retry-After), and so are all
// of them (503 unavailable with Retry-After); a stream that ends frees its place.
func TestStreamsArePerTokenAndInAllCapped(t *testing.T) {
	url := streamServer(t, httplimit.Limits{MaxStreamsPerToken: 2, MaxStreams: 3}, nil)
	status, _, _, stopFirst := openStream(t, url, "operator")
	if status != http.StatusOK {
		t.Fatalf("first stream: HTTP %d", status)
	}
	steps := []struct {
		name, token string
		want        int
		code        string
	}{
		{"operator's second", "operator", http.StatusOK, ""},
		{"operator's third: over its cap", "operator", http.StatusTooManyRequests, "too_many_streams"},
		{"viewer's first: the last of all", "viewer", http.StatusOK, ""},
		{"viewer's second: over the cap of all", "viewer", http.StatusServiceUnavailable, "unavailable"},
		{"another's first: over the cap of all", "other", http.StatusServiceUnavailable, "unavailable"},
	}
	for _, st := range steps {
		status, retryAfter, body, _ := openStream(t, url, st.token)
		if status != st.want {
			t.Fatalf("%s: HTTP %d, want %d", st.name, status, st.want)
		}
		if status != http.StatusOK && (retryAfter == "" || body.Error.Code != st.code) {
			t.Fatalf("%s: HTTP %d, Retry-After %q, code %q; want Retry-After and code %q", st.name, status, retryAfter,
				body.Error.Code, st.code)
		}
	}
	// The first stream ends: its place is the operator's again, once the server
	// sees it gone.
	stopFirst()
	deadline := time.Now().Add(wait)
	for {
		status, _, _, _ := openStream(t, url, "operator")
		if status == http.StatusOK {
			break
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after a stream ended: HTTP %d", status)
		}
	}
}

// TestStreamOfAClientThatStopsReadingEnds: a client that opens a stream and
// stops reading holds its place only until a write has waited write_timeout:
// the stream ends, and its token may open another.
func TestStreamOfAClientThatStopsReadingEnds(t *testing.T) {
	events := make(chan string)
	url := streamServer(t, httplimit.Limits{WriteTimeout: 300 * time.Millisecond, MaxStreamsPerToken: 1}, events)
	stalled, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"), wait)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_ = stalled.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := io.WriteString(stalled, "GET / HTTP/1.1\r\nHost: chiffon\r\nX-Token: operator\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Large events fill the socket's buffers until the token's one place is free
	// again.
	event := strings.Repeat("x", 128<<10)
	deadline := time.Now().Add(wait)
	for {
		select {
		case events <- event:
		case <-time.After(100 * time.Millisecond): // the stalled stream waits on its write
		}
		status, _, _, stop := openStream(t, url, "operator")
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

// TestStreamLivesPastTheServerTimeouts: a stream keeps getting events long after
// the server's write and read timeouts, which end every other request, have
// passed, over HTTP/1.1 and HTTP/2.
func TestStreamLivesPastTheServerTimeouts(t *testing.T) {
	for _, tc := range []struct{ name, proto string }{{"http", "HTTP/1.1"}, {"https", "HTTP/1.1"}, {"https h2", "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			limits := httplimit.Limits{WriteTimeout: timeout, ReadTimeout: timeout}.WithDefaults()
			events := make(chan string)
			streams := httplimit.NewStreamLimiter(limits, tokenOf)
			h := streams.Stream(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				if rc.Flush() != nil { // the headers
					return
				}
				for {
					select {
					case <-r.Context().Done():
						return
					case e := <-events:
						if _, err := io.WriteString(w, e+"\n"); err != nil || rc.Flush() != nil {
							return
						}
					}
				}
			})
			https := tc.name != "http"
			addr, clientTLS := serveWith(t, limits, https, h)
			tr := &http.Transport{TLSClientConfig: clientTLS, ForceAttemptHTTP2: tc.proto == "HTTP/2.0"}
			defer tr.CloseIdleConnections()
			scheme := "http"
			if https {
				scheme = "https"
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, scheme+"://"+addr+"/", nil)
			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil || resp.StatusCode != http.StatusOK || resp.Proto != tc.proto {
				t.Fatalf("stream: %v %v", resp, err)
			}
			defer resp.Body.Close()
			// Each event is larger than the server's write buffers and further apart
			// than the timeout, so that each write reaches the connection on its own,
			// long after the one before; the stream must carry those sent after four
			// timeouts have passed.
			event := strings.Repeat("x", 16<<10)
			buf := make([]byte, len(event)+1)
			tick := time.NewTicker(timeout * 3 / 2)
			defer tick.Stop()
			for time.Since(start) <= 4*timeout {
				select {
				case <-tick.C:
				case <-time.After(wait):
					t.Fatal("no tick")
				}
				select {
				case events <- event:
				case <-time.After(wait):
					t.Fatalf("after %s: the stream's handler is gone", time.Since(start).Round(time.Millisecond))
				}
				if _, err := io.ReadFull(resp.Body, buf); err != nil {
					t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
				}
			}
		})
	}
}
