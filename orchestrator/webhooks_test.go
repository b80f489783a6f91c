package orchestrator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// TestWebhooksTellTheEndOfTasks: a receiver of task.failed gets the failed task,
// signed with its secret, once the end is stored; one of task.finished gets both
// ends; the API lists the deliveries. A receiver answering 500 at first gets it
// on a later attempt; dispatch does not wait for it.
func TestWebhooksTellTheEndOfTasks(t *testing.T) {
	type got struct{ event, task string }
	var mu sync.Mutex
	var failedGot, allGot []got
	fails := 2
	receiver := func(secret string, into *[]got, flaky bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			defer mu.Unlock()
			if flaky && fails > 0 {
				fails--
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			if !webhook.Verify([]byte(secret), body, r.Header.Get(webhook.HeaderSignature)) {
				t.Errorf("a delivery with a wrong signature")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			var d struct {
				Event string
				Data  task.Task
			}
			_ = json.Unmarshal(body, &d)
			*into = append(*into, got{d.Event, d.Data.ID + ":" + string(d.Data.State)})
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	onlyFailed := receiver("secret-a", &failedGot, true)
	all := receiver("secret-b", &allGot, false)
	e := newEnv(t, "code-1")
	e.cfg.Webhooks = []orchestrator.WebhookConfig{
		{URL: onlyFailed.URL, Events: []string{webhook.TaskFailed}, Secret: "secret-a"},
		{URL: all.URL, Events: []string{webhook.TaskFinished}, Secret: "secret-b"},
	}
	e.cfg.Retry.MaxRetries = -1
	o, a := e.openWithAgent("code-1", 4)
	ok := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	a.result(w, envelope.ResultSuccess, 0, "hi\n", nil)
	bad := submit(t, o, nil)
	a.fail(a.next(), errcodes.NewInvalidMessage("parameters.text", "must be a number"))
	waitFinal(t, o, ok.ID)
	badFinal := waitFinal(t, o, bad.ID)
	waitFor(t, "the deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failedGot) == 1 && len(allGot) == 2
	})
	mu.Lock()
	if failedGot[0] != (got{webhook.TaskFailed, bad.ID + ":" + string(badFinal.State)}) {
		t.Errorf("the task.failed receiver got %v", failedGot)
	}
	mu.Unlock()
	var ds []webhook.Delivery
	deadline := time.Now().Add(wait)
	for {
		status, body := call(t, e.client(o), "GET", "/api/v1/webhooks/deliveries", e.cfg.APIToken, "")
		if status != 200 || json.Unmarshal([]byte(body), &ds) != nil {
			t.Fatalf("deliveries: %d %s", status, body)
		}
		delivered := 0
		for _, d := range ds {
			if d.State == webhook.StateDelivered {
				delivered++
			}
		}
		if delivered == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v", ds)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range ds {
		if d.Receiver == onlyFailed.URL && d.Attempts != 3 {
			t.Errorf("the flaky receiver's delivery took %d attempts, want 3", d.Attempts)
		}
	}
}

// TestWebhooksConfigIsChecked: a receiver needs an http(s) URL, known events
// and a secret.
func TestWebhooksConfigIsChecked(t *testing.T) {
	for want, w := range map[string]orchestrator.WebhookConfig{
		"webhooks[0].url":         {URL: "ftp://x", Events: []string{webhook.TaskFailed}, Secret: "s"},
		"webhooks[0].events":      {URL: "http://x", Secret: "s"},
		"webhooks[0].events[0]":   {URL: "http://x", Events: []string{"task.exploded"}, Secret: "s"},
		"webhooks[0].secret_file": {URL: "http://x", Events: []string{webhook.TaskFailed}},
	} {
		e := newEnv(t)
		e.cfg.Webhooks = []orchestrator.WebhookConfig{w}
		if err := e.cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %s", w, err, want)
		}
	}
}

// TestWebhookDeliveriesOutliveARestart: a delivery its receiver has not taken
// when the orchestrator stops is kept in the task store and sent after the next
// start, with its id.
func TestWebhookDeliveriesOutliveARestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		var mu sync.Mutex
		up := false
		var tries, took []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			id := r.Header.Get(webhook.HeaderDelivery)
			tries = append(tries, id)
			if !up {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			took = append(took, id)
		}))
		t.Cleanup(srv.Close)
		e := newStoreEnv(t, kind, "code-1")
		e.cfg.Webhooks = []orchestrator.WebhookConfig{{URL: srv.URL, Events: []string{webhook.TaskFailed}, Secret: "s"}}
		e.cfg.Retry.MaxRetries = -1
		o, a := e.openWithAgent("code-1", 2)
		tk := submit(t, o, nil)
		a.result(a.next(), envelope.ResultFailed, 1, "", nil)
		waitFinal(t, o, tk.ID)
		waitFor(t, "a first try", func() bool { mu.Lock(); defer mu.Unlock(); return len(tries) > 0 })
		o.Close()
		mu.Lock()
		first := tries[0]
		up = true
		mu.Unlock()

		o = e.open()
		waitFor(t, "the kept delivery taken", func() bool { mu.Lock(); defer mu.Unlock(); return len(took) == 1 })
		mu.Lock()
		defer mu.Unlock()
		if took[0] != first {
			t.Fatalf("took delivery %s, want the kept %s", took[0], first)
		}
		waitFor(t, "the kept delivery forgotten", func() bool {
			ds := o.Deliveries()
			return len(ds) == 1 && ds[0].State == webhook.StateDelivered
		})
	})
}
