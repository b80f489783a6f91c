package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// FuzzAPISubmit posts arbitrary bodies to POST /api/v1/tasks: the API answers 201 or
// a 4xx with a JSON error body, never a 5xx, and never panics.
func FuzzAPISubmit(f *testing.F) {
	for _, s := range []string{
		`{"to_agent":"code","work_type":"echo","parameters":{"message":"hi"}}`,
		`{"to_agent":"code","work_type":"echo","hints":{"max_duration_seconds":5,"agent_id":"code-1"}}`,
		`{"to_agent":"nobody"}`, `{"to_agent":"code","work_type":1}`, `{"x":1}`, `{} {}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	srv := testnats.Start(f, broker.ServerConfig{})
	cfg := orchestrator.Config{NATS: broker.NATSConfig{URLs: []string{srv.ClientURL()}},
		DataDir: f.TempDir(), APIToken: broker.NewToken()}
	o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { o.Close() })
	h := o.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/tasks", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cfg.APIToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusCreated:
		case rec.Code >= 400 && rec.Code < 500:
			var eb api.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("HTTP %d with a body that is not a JSON error: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("HTTP %d for body %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}

// FuzzClientEvents feeds arbitrary Server-Sent Event streams to Client.Events: it
// never panics, returns by its context's deadline, and does not hammer a server whose
// stream keeps ending without news.
func FuzzClientEvents(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: {\"seq\":1,\"type\":\"state\",\"state\":\"running\"}\n\nid: 2\ndata: {\"seq\":2,\"type\":\"result\",\"state\":\"succeeded\"}\n\n",
		"data: {\"seq\":1,\"state\":\"running\"}\n\n", "data: {\n\n", "data: \n", "", ":keepalive\n\n",
		"data: {\"seq\":-1,\"state\":\"succeeded\"}\n",
	} {
		f.Add([]byte(s), false)
	}
	var stream atomic.Pointer[[]byte]
	var final atomic.Bool
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(*stream.Load())
			return
		}
		state := "running"
		if final.Load() {
			state = "succeeded"
		}
		_, _ = w.Write([]byte(`{"id":"t","state":"` + state + `"}`))
	}))
	f.Cleanup(srv.Close)
	c := &client.Client{BaseURL: srv.URL, Token: "t", HTTP: srv.Client()}
	f.Fuzz(func(t *testing.T, data []byte, isFinal bool) {
		stream.Store(&data)
		final.Store(isFinal)
		hits.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		_ = c.Events(ctx, "t", func(*task.Event) error { return nil })
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Events returned %s after its context's deadline", d)
		}
		if n := hits.Load(); n > 30 {
			t.Fatalf("%d requests in 150ms: the client hammers a server whose stream ends without news", n)
		}
	})
}
