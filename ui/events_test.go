package ui

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// streamServer serves the dashboard, with a server write timeout, over an API
// whose task events stream is events and whose other calls are fakeAPI's.
func streamServer(t *testing.T, writeTimeout time.Duration, events http.HandlerFunc) *httptest.Server {
	t.Helper()
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/tasks/{id}/events", events)
	api.Handle("/", fakeAPI(t, &apiLog{}))
	auth := func(tok string) (string, bool) { return "viewer", tok == viewerToken }
	u, err := New(Options{API: api, Authenticate: auth, Path: "/", SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(u)
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

const streamTaskID = "00000000-0000-4000-8000-000000000001"

// TestRelayPassesOnARefusedStreamWithRetryAfter: when the API refuses an event
// stream for a cap (429 or 503), the page gets the same status with its
// Retry-After, so that it knows when to try again.
func TestRelayPassesOnARefusedStreamWithRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := streamServer(t, 0, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "5")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = fmt.Fprint(w, `{"error":{"code":"too_many_streams","message":"cap"}}`)
			})
			c := browserClient(t)
			signIn(t, c, srv.URL+"/", viewerToken)
			resp, _ := get(t, c, srv.URL+"/tasks/"+streamTaskID+"/events")
			if resp.StatusCode != status || resp.Header.Get("Retry-After") != "5" {
				t.Fatalf("HTTP %d, Retry-After %q; want %d with 5", resp.StatusCode, resp.Header.Get("Retry-After"), status)
			}
		})
	}
}

// TestRelayedStreamLivesPastTheWriteTimeout: the write deadlines the API's
// stream sets, one per write, reach the page's connection, so that a relayed
// stream outlives the server's write timeout as the API's own does.
func TestRelayedStreamLivesPastTheWriteTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := streamServer(t, timeout, func(w http.ResponseWriter, r *http.Request) {
		// As the API's event streams do (orchestrator/httplimit/streams.go).
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(timeout / 4)
		defer tick.Stop()
		for n := 1; ; n++ {
			_ = rc.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: progress\ndata: {}\n\n", n); err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	start := time.Now()
	resp, err := c.Get(srv.URL + "/tasks/" + streamTaskID + "/events")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "id: ") && time.Since(start) > 4*timeout {
			return
		}
	}
	t.Fatalf("the relayed stream ended after %s: %v", time.Since(start).Round(time.Millisecond), sc.Err())
}
