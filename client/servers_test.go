package client_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

const taskJSON = `{"id":"01a21b10-0000-7000-8000-000000000001","state":"pending","to_agent":"code","work_type":"echo"}`

// deadURL is the URL of a port nobody listens on: a connection is refused.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// counted serves h and counts the requests.
func counted(t *testing.T, n *atomic.Int32, h http.HandlerFunc) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func created(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, taskJSON)
}

func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `{"error":{"code":"unavailable","message":"no orchestrator leads"}}`)
}

var submitReq = api.SubmitRequest{ToAgent: "code", WorkType: "echo"}

// TestARequestGoesToTheOrchestratorThatCanTakeIt: a refused connection or a 503
// moves the request to the next server, and the one that answered is asked
// first from then on.
func TestARequestGoesToTheOrchestratorThatCanTakeIt(t *testing.T) {
	var busy, good atomic.Int32
	busyURL := counted(t, &busy, unavailable)
	goodURL := counted(t, &good, created)
	c := &client.Client{BaseURL: deadURL(t), Servers: []string{busyURL, goodURL}}
	for i := range 2 {
		if _, err := c.Submit(t.Context(), submitReq); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	if busy.Load() != 1 || good.Load() != 2 {
		t.Fatalf("the 503 server was asked %d times, the good one %d: want 1 and 2", busy.Load(), good.Load())
	}
}

// TestAWriteWaitsOutATakeover: while every orchestrator answers 503, a write
// tries again, within its Patience, and gets through once one leads; without
// Patience the 503 is the answer.
func TestAWriteWaitsOutATakeover(t *testing.T) {
	var n atomic.Int32
	url := counted(t, &n, func(w http.ResponseWriter, r *http.Request) {
		if n.Load() < 3 {
			unavailable(w, r)
			return
		}
		created(w, r)
	})
	c := &client.Client{BaseURL: url, Patience: 30 * time.Second}
	if _, err := c.Submit(t.Context(), submitReq); err != nil || n.Load() != 3 {
		t.Fatalf("submit: %v after %d tries, want success on the third", err, n.Load())
	}
	n.Store(0)
	c = &client.Client{BaseURL: url}
	var ae *client.APIError
	if _, err := c.Submit(t.Context(), submitReq); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || n.Load() != 1 {
		t.Fatalf("without patience: %v after %d tries, want the 503 at once", err, n.Load())
	}
}

// TestAWriteThatMayHaveArrivedIsNotSentAgain: a connection that breaks after
// the request was sent is not retried on the next server: the error says the
// write may have been carried out.
func TestAWriteThatMayHaveArrivedIsNotSentAgain(t *testing.T) {
	var cut, other atomic.Int32
	cutURL := counted(t, &cut, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	otherURL := counted(t, &other, created)
	c := &client.Client{BaseURL: cutURL, Servers: []string{otherURL}, Patience: time.Minute}
	_, err := c.Submit(t.Context(), submitReq)
	var md *client.MaybeDoneError
	if !errors.As(err, &md) || other.Load() != 0 {
		t.Fatalf("got %v, the other server asked %d times; want MaybeDoneError and no second send", err, other.Load())
	}
	// A read is safe to send again.
	if _, err := c.Get(t.Context(), "01a21b10-0000-7000-8000-000000000001"); err != nil || other.Load() != 1 {
		t.Fatalf("a read with its connection cut: %v, the next server asked %d times; want it answered there", err, other.Load())
	}
}

// TestEventsFollowATaskOntoAnotherOrchestrator: when the orchestrator serving
// a task's stream goes away, the stream resumes on the next one, from the last
// event seen.
func TestEventsFollowATaskOntoAnotherOrchestrator(t *testing.T) {
	id := "01a21b10-0000-7000-8000-000000000001"
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: state\ndata: {\"seq\":1,\"type\":\"state\",\"state\":\"running\"}\n\n")
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	var resumedFrom atomic.Value
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tasks/"+id {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"`+id+`","state":"running"}`)
			return
		}
		resumedFrom.Store(r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 2\nevent: state\ndata: {\"seq\":2,\"type\":\"state\",\"state\":\"succeeded\"}\n\n")
	}))
	defer second.Close()
	c := &client.Client{BaseURL: first.URL, Servers: []string{second.URL}}
	var seqs []int64
	errc := make(chan error, 1)
	go func() {
		errc <- c.Events(t.Context(), id, func(ev *task.Event) error {
			seqs = append(seqs, ev.Seq)
			if ev.Seq == 1 {
				first.Close() // the first orchestrator dies
			}
			return nil
		})
	}()
	select {
	case err := <-errc:
		if err != nil || len(seqs) != 2 || seqs[1] != 2 || resumedFrom.Load() != "1" {
			t.Fatalf("events %v, err %v, resumed from %v; want 1 then 2, resumed from 1", seqs, err, resumedFrom.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow did not move to the other orchestrator")
	}
}
