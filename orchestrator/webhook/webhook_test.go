package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver is an HTTP receiver that checks signatures with its secret and
// answers fail times with 500 before taking deliveries.
type receiver struct {
	mu       sync.Mutex
	secret   []byte
	fail     int
	attempts int
	got      []map[string]any // the deliveries it took whose signature held
	forged   int              // deliveries whose signature did not hold
	took     chan struct{}
}

func newReceiver(t *testing.T, secret string, fail int) (*receiver, *httptest.Server) {
	rc := &receiver{secret: []byte(secret), fail: fail, took: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.attempts++
		if rc.attempts <= rc.fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if !signedWith(rc.secret, body, r.Header.Get(webhook.HeaderSignature)) {
			rc.forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		m["header_event"], m["header_delivery"] = r.Header.Get(webhook.HeaderEvent), r.Header.Get(webhook.HeaderDelivery)
		rc.got = append(rc.got, m)
		rc.took <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *receiver) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-rc.took:
		case <-time.After(10 * time.Second):
			t.Fatalf("the receiver took %d of %d deliveries", len(rc.got), n)
		}
	}
}

var fast = webhook.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}

// TestDeliveriesArriveSignedAndRetried: a receiver answering 500 three times
// gets the delivery on the fourth try, signed, with its event and id in the
// headers; the record says delivered after 4 attempts.
func TestDeliveriesArriveSignedAndRetried(t *testing.T) {
	rc, srv := newReceiver(t, "s3cret", 3)
	d := webhook.New([]webhook.Receiver{{URL: srv.URL, Events: []string{webhook.TaskFailed}, Secret: []byte("s3cret")}}, fast)
	defer d.Close()
	d.Send(webhook.TaskFailed, map[string]any{"id": "task-1", "state": "failed"})
	d.Send(webhook.TaskSucceeded, map[string]any{"id": "task-2"}) // not asked for
	rc.wait(t, 1)
	rc.mu.Lock()
	got, attempts := rc.got[0], rc.attempts
	rc.mu.Unlock()
	data, _ := got["data"].(map[string]any)
	if got["event"] != webhook.TaskFailed || got["header_event"] != webhook.TaskFailed || data["id"] != "task-1" ||
		got["header_delivery"] != got["id"] || attempts != 4 {
		t.Fatalf("delivery %v after %d attempts", got, attempts)
	}
	waitRecord(t, d, func(ds []webhook.Delivery) bool {
		return len(ds) == 1 && ds[0].State == webhook.StateDelivered && ds[0].Attempts == 4 && ds[0].LastCode == 200
	})
}

// TestAWrongSecretIsDetected: a receiver that holds another secret finds the
// signature wrong, and the dispatcher keeps trying.
func TestAWrongSecretIsDetected(t *testing.T) {
	rc, srv := newReceiver(t, "the receiver's", 0)
	d := webhook.New([]webhook.Receiver{{URL: srv.URL, Events: []string{webhook.TaskFinished}, Secret: []byte("another")}}, fast)
	defer d.Close()
	d.Send(webhook.TaskCancelled, map[string]any{"id": "task-1"})
	waitRecord(t, d, func(ds []webhook.Delivery) bool { return len(ds) == 1 && ds[0].Attempts >= 2 && ds[0].LastCode == 401 })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.forged < 2 || len(rc.got) != 0 {
		t.Fatalf("forged %d, took %d", rc.forged, len(rc.got))
	}
	body := []byte(`{"a":1}`)
	if !webhook.Verify([]byte("k"), body, webhook.Sign([]byte("k"), body)) || webhook.Verify([]byte("k"), []byte(`{"a":2}`), webhook.Sign([]byte("k"), body)) {
		t.Fatal("Verify does not check the body")
	}
}

// TestAFullQueueDropsTheOldest: with the receiver down, deliveries past the
// queue's bound drop the oldest, recorded as dropped, and a dropped one is not
// tried again; when the receiver comes back it gets the rest, in order.
func TestAFullQueueDropsTheOldest(t *testing.T) {
	rc, srv := newReceiver(t, "k", 1<<30) // down
	opts := fast
	opts.Queue = 3
	d := webhook.New([]webhook.Receiver{{URL: srv.URL, Events: []string{webhook.TaskSucceeded}, Secret: []byte("k")}}, opts)
	defer d.Close()
	for i := range 5 {
		d.Send(webhook.TaskSucceeded, map[string]any{"n": i})
	}
	rc.mu.Lock()
	rc.fail = 0 // back
	rc.mu.Unlock()
	delivered := func() []float64 {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		var order []float64
		for _, g := range rc.got {
			order = append(order, g["data"].(map[string]any)["n"].(float64))
		}
		return order
	}
	deadline := time.Now().Add(10 * time.Second)
	for got := delivered(); len(got) == 0 || got[len(got)-1] != 4; got = delivered() {
		if time.Now().After(deadline) {
			t.Fatalf("the newest delivery never came: %v", got)
		}
		rc.wait(t, 1)
	}
	// In order, and not all five: what the full queue dropped was not sent (one
	// on its way when it was dropped may have been).
	if got := delivered(); !slices.IsSorted(got) || len(got) > 4 {
		t.Fatalf("delivered %v; want them in order, without those dropped; record %+v", got, d.Deliveries())
	}
	dropped := 0
	for _, del := range d.Deliveries() {
		if del.State == webhook.StateDropped {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("no delivery recorded as dropped")
	}
}

// TestSendNeverWaitsOnAReceiver: a receiver that hangs does not slow Send, and
// Close returns.
func TestSendNeverWaitsOnAReceiver(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	opts := fast
	opts.Timeout = time.Hour
	d := webhook.New([]webhook.Receiver{{URL: "http://user:pw@" + strings.TrimPrefix(srv.URL, "http://"), Events: []string{webhook.TaskFailed}, Secret: []byte("k")}}, opts)
	start := time.Now()
	for range 2000 {
		d.Send(webhook.TaskFailed, map[string]any{"id": "x"})
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("2000 sends to a hung receiver took %s", took)
	}
	for _, del := range d.Deliveries() {
		if strings.Contains(del.Receiver, "pw") {
			t.Fatalf("the record shows the URL's password: %s", del.Receiver)
		}
	}
	d.Close()
}

func waitRecord(t *testing.T, d *webhook.Dispatcher, cond func([]webhook.Delivery) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(d.Deliveries()) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: %+v", d.Deliveries())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// signedWith checks a signature as a receiver written without this package
// would: sha256= and the hex HMAC-SHA256 of the body.
func signedWith(secret, body []byte, signature string) bool {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal([]byte("sha256="+hex.EncodeToString(mac.Sum(nil))), []byte(signature))
}

// TestEventsGoToTheirReceivers: task.finished covers the task events and not
// batch.finished; a batch.finished receiver gets batches only.
func TestEventsGoToTheirReceivers(t *testing.T) {
	tasks, srvTasks := newReceiver(t, "k", 0)
	batches, srvBatches := newReceiver(t, "k", 0)
	d := webhook.New([]webhook.Receiver{
		{URL: srvTasks.URL, Events: []string{webhook.TaskFinished}, Secret: []byte("k")},
		{URL: srvBatches.URL, Events: []string{webhook.BatchFinished}, Secret: []byte("k")},
	}, fast)
	defer d.Close()
	d.Send(webhook.BatchFinished, map[string]any{"id": "batch-1"})
	d.Send(webhook.TaskFailed, map[string]any{"id": "task-1"})
	tasks.wait(t, 1)
	batches.wait(t, 1)
	waitRecord(t, d, func(ds []webhook.Delivery) bool { return len(ds) == 2 })
	tasks.mu.Lock()
	defer tasks.mu.Unlock()
	batches.mu.Lock()
	defer batches.mu.Unlock()
	if len(tasks.got) != 1 || tasks.got[0]["event"] != webhook.TaskFailed {
		t.Fatalf("the task.finished receiver took %v", tasks.got)
	}
	if len(batches.got) != 1 || batches.got[0]["event"] != webhook.BatchFinished {
		t.Fatalf("the batch.finished receiver took %v", batches.got)
	}
}

// memKeeper is a Keeper in memory.
type memKeeper struct {
	mu   sync.Mutex
	kept map[string]webhook.Kept
}

func (k *memKeeper) Keep(v webhook.Kept) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[v.ID] = v
	return nil
}

func (k *memKeeper) Forget(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.kept, id)
	return nil
}

func (k *memKeeper) list() []webhook.Kept {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []webhook.Kept
	for _, v := range k.kept {
		out = append(out, v)
	}
	return out
}

// TestKeptDeliveriesOutliveTheDispatcher: deliveries a receiver that is down
// has not taken are kept; a new dispatcher (after a restart) restored from the
// Keeper delivers them, with their ids, and the Keeper forgets each once taken.
// A kept delivery whose receiver is gone from the config is forgotten.
func TestKeptDeliveriesOutliveTheDispatcher(t *testing.T) {
	rc, srv := newReceiver(t, "k", 1<<30) // down
	k := &memKeeper{kept: map[string]webhook.Kept{}}
	opts := fast
	opts.Keeper = k
	receivers := []webhook.Receiver{{URL: srv.URL, Events: []string{webhook.TaskFailed}, Secret: []byte("k")}}
	d := webhook.New(receivers, opts)
	for i := range 3 {
		d.Send(webhook.TaskFailed, map[string]any{"n": i})
	}
	d.Close() // at once: what Send queued for the Keeper is kept before Close returns
	kept := k.list()
	if len(kept) != 3 {
		t.Fatalf("kept %d deliveries, want 3", len(kept))
	}
	ids := map[string]bool{}
	for _, v := range kept {
		ids[v.ID] = true
	}

	rc.mu.Lock()
	rc.fail = 0 // back
	rc.mu.Unlock()
	d = webhook.New(receivers, opts)
	defer d.Close()
	d.Restore(append(kept, webhook.Kept{ID: "gone", Event: webhook.TaskFailed, Receiver: "http://gone.example/hook", Body: []byte("{}")}))
	rc.wait(t, 3)
	rc.mu.Lock()
	for _, m := range rc.got {
		if !ids[m["header_delivery"].(string)] {
			t.Errorf("delivered %v, not one of the kept ids", m["header_delivery"])
		}
	}
	rc.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for len(k.list()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still kept after delivery: %v", k.list())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
