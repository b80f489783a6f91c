// Package webhook delivers the orchestrator's events (a task that succeeded,
// failed, was cancelled) to HTTP receivers: each delivery is a JSON POST signed
// with HMAC-SHA256 of its body, retried with backoff until the receiver takes it,
// and recorded. Sending never waits on a receiver: events queue per receiver, up
// to a bound past which the oldest are dropped (and recorded as such), and one
// goroutine per receiver delivers them in order.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Headers of a delivery.
const (
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body, keyed
	// with the receiver's secret.
	HeaderSignature = "Chiffon-Signature"
	// HeaderEvent names the event, such as "task.failed".
	HeaderEvent = "Chiffon-Event"
	// HeaderDelivery is the delivery's id, the same on every retry of it.
	HeaderDelivery = "Chiffon-Delivery"
)

// Events a receiver may ask for.
const (
	TaskSucceeded = "task.succeeded"
	TaskFailed    = "task.failed" // failed, or ended in error
	TaskCancelled = "task.cancelled"
	TaskFinished  = "task.finished" // any of the three
	// BatchFinished: every task of a batch ended (or was skipped); the data is
	// the batch.
	BatchFinished = "batch.finished"
	// ApprovalRequested: a task waits for an operator's yes; the data is the
	// task.
	ApprovalRequested = "approval.requested"
	// WorkflowFinished: a workflow run ended; the data is the run.
	WorkflowFinished = "workflow.finished"
	// WorkflowStepStarted and WorkflowStepFinished: a step of a run started
	// or ended (skipped too); the data is an api.WorkflowStepEvent.
	WorkflowStepStarted  = "workflow.step.started"
	WorkflowStepFinished = "workflow.step.finished"
)

// Events are every event name a receiver may list.
var Events = []string{TaskSucceeded, TaskFailed, TaskCancelled, TaskFinished, BatchFinished, ApprovalRequested,
	WorkflowFinished, WorkflowStepStarted, WorkflowStepFinished}

// Receiver is one receiver of deliveries.
type Receiver struct {
	// URL is where deliveries are POSTed.
	URL string
	// Events are the events it gets.
	Events []string
	// Secret keys the HMAC of each body.
	Secret []byte
}

// Sign returns the signature header value of body for secret: what a receiver
// computes and compares, in constant time, with HeaderSignature.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature is body's under secret.
func Verify(secret, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

// Options tune delivery; zero values mean the defaults.
type Options struct {
	// Queue bounds each receiver's waiting deliveries; 0 means 1000.
	Queue int
	// Timeout bounds one POST; 0 means 10 s.
	Timeout time.Duration
	// Backoff is the first wait after a failed POST, doubling up to MaxBackoff;
	// 0 means 1 s and 1 min.
	Backoff, MaxBackoff time.Duration
	// Record bounds the deliveries kept for Deliveries; 0 means 1000.
	Record int
	// Client makes the POSTs; nil means a client with Timeout.
	Client *http.Client
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
	// Keeper, when set, keeps the deliveries not taken yet beyond the process:
	// Restore hands them back to a new dispatcher.
	Keeper Keeper
}

// Keeper keeps the deliveries a receiver has not taken yet, so that a restart
// does not lose them: the dispatcher keeps a delivery before its first attempt
// and forgets it once taken or dropped. Its errors are logged; delivery goes on.
type Keeper interface {
	Keep(k Kept) error
	Forget(id string) error
}

// Kept is a delivery as a Keeper keeps it.
type Kept struct {
	ID    string `json:"id"`
	Event string `json:"event"`
	// Receiver is the receiver's URL without user info.
	Receiver string    `json:"receiver"`
	Created  time.Time `json:"created_at"`
	Body     []byte    `json:"body"`
}

// Delivery is what the dispatcher knows of one delivery.
type Delivery struct {
	ID       string    `json:"id"`
	Event    string    `json:"event"`
	Receiver string    `json:"receiver"`
	Created  time.Time `json:"created_at"`
	// State is pending, delivered or dropped (the queue was full).
	State    string     `json:"state"`
	Attempts int        `json:"attempts"`
	LastCode int        `json:"last_status,omitempty"`
	LastErr  string     `json:"last_error,omitempty"`
	Done     *time.Time `json:"delivered_at,omitempty"`
}

// Delivery states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateDropped   = "dropped"
)

// Dispatcher queues events and delivers them.
type Dispatcher struct {
	opts   Options
	log    *slog.Logger
	queues []*queue
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	record []*Delivery // oldest first, at most opts.Record

	// keepOps wait for the keeper goroutine, which calls the Keeper in order
	// (a Keep before the Forget of the same delivery) without Send waiting.
	keepMu   sync.Mutex
	keepOps  []keepOp
	keepWake chan struct{}
}

// queue is one receiver's waiting deliveries.
type queue struct {
	r    Receiver
	name string // the URL without user info, for records and logs
	mu   sync.Mutex
	wait []pending
	wake chan struct{}
}

type pending struct {
	d    *Delivery
	body []byte
}

// keepOp is one call to the Keeper: keep k, or forget the delivery id.
type keepOp struct {
	k  *Kept
	id string
}

// New starts a dispatcher for receivers; Close stops it.
func New(receivers []Receiver, opts Options) *Dispatcher {
	if opts.Queue <= 0 {
		opts.Queue = 1000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.Record <= 0 {
		opts.Record = 1000
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	d := &Dispatcher{opts: opts, log: opts.Logger, keepWake: make(chan struct{}, 1)}
	d.ctx, d.stop = context.WithCancel(context.Background())
	if opts.Keeper != nil {
		d.wg.Add(1)
		go d.keeper()
	}
	for _, r := range receivers {
		q := &queue{r: r, name: redact(r.URL), wake: make(chan struct{}, 1)}
		d.queues = append(d.queues, q)
		d.wg.Add(1)
		go d.deliver(q)
	}
	return d
}

// redact is a URL without its user info, which may hold a password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a bad URL)"
	}
	u.User = nil
	return u.String()
}

// Send queues event, with data as the body's "data", for every receiver that
// asked for it. It never waits on a receiver.
func (d *Dispatcher) Send(event string, data any) {
	now := time.Now().UTC()
	for _, q := range d.queues {
		if !q.wants(event) {
			continue
		}
		del := &Delivery{ID: envelope.NewID(), Event: event, Receiver: q.name, Created: now, State: StatePending}
		body, err := json.Marshal(map[string]any{"id": del.ID, "event": event, "at": now, "data": data})
		if err != nil {
			d.log.Error("webhook: encode event", "event", event, "err", err)
			return
		}
		d.keep(del)
		d.queueKeep(keepOp{k: &Kept{ID: del.ID, Event: event, Receiver: q.name, Created: now, Body: body}})
		q.mu.Lock()
		if len(q.wait) >= d.opts.Queue {
			d.mu.Lock()
			q.wait[0].d.State = StateDropped
			d.mu.Unlock()
			d.queueKeep(keepOp{id: q.wait[0].d.ID})
			q.wait = q.wait[1:]
			d.log.Warn("webhook: queue full, oldest delivery dropped", "receiver", q.name)
		}
		q.wait = append(q.wait, pending{d: del, body: body})
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// isHead reports whether del is still the first of q's deliveries.
func (q *queue) isHead(del *Delivery) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.wait) > 0 && q.wait[0].d == del
}

func (q *queue) wants(event string) bool {
	if slices.Contains(q.r.Events, event) {
		return true
	}
	return strings.HasPrefix(event, "task.") && slices.Contains(q.r.Events, TaskFinished)
}

// keep records del, dropping the oldest record past the bound.
func (d *Dispatcher) keep(del *Delivery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.record = append(d.record, del)
	if len(d.record) > d.opts.Record {
		d.record = d.record[len(d.record)-d.opts.Record:]
	}
}

// Deliveries returns copies of the recorded deliveries, newest first.
func (d *Dispatcher) Deliveries() []Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Delivery, len(d.record))
	for i, del := range d.record {
		out[len(d.record)-1-i] = *del
	}
	return out
}

// deliver sends q's deliveries in order, each until the receiver takes it.
func (d *Dispatcher) deliver(q *queue) {
	defer d.wg.Done()
	for {
		q.mu.Lock()
		var next *pending
		if len(q.wait) > 0 {
			next = &q.wait[0]
		}
		q.mu.Unlock()
		if next == nil {
			select {
			case <-q.wake:
				continue
			case <-d.ctx.Done():
				return
			}
		}
		wait := d.opts.Backoff
		for !d.post(q, next) {
			select {
			case <-time.After(wait):
			case <-d.ctx.Done():
				return
			}
			if !q.isHead(next.d) {
				break // dropped while it waited: the queue filled
			}
			wait = min(2*wait, d.opts.MaxBackoff)
		}
		q.mu.Lock()
		if len(q.wait) > 0 && q.wait[0].d == next.d { // unless dropped meanwhile
			q.wait = q.wait[1:]
		}
		q.mu.Unlock()
		d.forget(next.d.ID) // taken or dropped: nothing to keep
	}
}

// Restore queues the deliveries a Keeper kept, oldest first, behind those
// queued: each to the receiver it was for, with its id (receivers deduplicate
// by Chiffon-Delivery). One whose receiver is no longer configured is
// forgotten; one already queued is left as it is.
func (d *Dispatcher) Restore(kept []Kept) {
	slices.SortFunc(kept, func(a, b Kept) int { return a.Created.Compare(b.Created) })
	for _, k := range kept {
		var q *queue
		for _, c := range d.queues {
			if c.name == k.Receiver {
				q = c
			}
		}
		if q == nil {
			d.forget(k.ID)
			continue
		}
		q.mu.Lock()
		queued := slices.ContainsFunc(q.wait, func(p pending) bool { return p.d.ID == k.ID })
		if !queued {
			del := &Delivery{ID: k.ID, Event: k.Event, Receiver: q.name, Created: k.Created, State: StatePending}
			q.wait = append(q.wait, pending{d: del, body: k.Body})
			d.keep(del)
		}
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// post makes one attempt and reports whether the receiver took the delivery
// (a 2xx answer).
func (d *Dispatcher) post(q *queue, p *pending) bool {
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.r.URL, bytes.NewReader(p.body))
	if err != nil {
		d.result(p.d, 0, err.Error())
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chiffon-webhook")
	req.Header.Set(HeaderEvent, p.d.Event)
	req.Header.Set(HeaderDelivery, p.d.ID)
	req.Header.Set(HeaderSignature, Sign(q.r.Secret, p.body))
	resp, err := d.opts.Client.Do(req)
	if err != nil {
		// The error names the URL, which may hold user info: say only what failed.
		d.result(p.d, 0, fmt.Sprintf("the POST failed: %v", unwrapURLError(err)))
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		d.result(p.d, resp.StatusCode, "the receiver answered "+resp.Status)
		return false
	}
	d.result(p.d, resp.StatusCode, "")
	return true
}

// unwrapURLError is the cause of a *url.Error, which repeats the URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// result records an attempt.
func (d *Dispatcher) result(del *Delivery, code int, problem string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	del.Attempts++
	del.LastCode, del.LastErr = code, problem
	if problem == "" {
		now := time.Now().UTC()
		del.State, del.Done = StateDelivered, &now
	}
	if problem != "" && (del.Attempts == 1 || del.Attempts%10 == 0) {
		d.log.Warn("webhook: delivery failed; trying again", "receiver", del.Receiver, "event", del.Event,
			"delivery", del.ID, "attempts", del.Attempts, "problem", problem)
	}
}

// forget tells the Keeper, if any, that delivery id is done with.
func (d *Dispatcher) forget(id string) {
	if d.opts.Keeper != nil {
		d.queueKeep(keepOp{id: id})
	}
}

// queueKeep queues op for the keeper goroutine; it never waits.
func (d *Dispatcher) queueKeep(op keepOp) {
	if d.opts.Keeper == nil {
		return
	}
	d.keepMu.Lock()
	d.keepOps = append(d.keepOps, op)
	d.keepMu.Unlock()
	select {
	case d.keepWake <- struct{}{}:
	default:
	}
}

// keeper calls the Keeper with the queued ops, in order, until Close; then it
// carries out those left, so that what was queued is kept for the next start.
func (d *Dispatcher) keeper() {
	defer d.wg.Done()
	for {
		d.keepMu.Lock()
		ops := d.keepOps
		d.keepOps = nil
		d.keepMu.Unlock()
		for _, op := range ops {
			var err error
			if op.k != nil {
				err = d.opts.Keeper.Keep(*op.k)
			} else {
				err = d.opts.Keeper.Forget(op.id)
			}
			if err != nil {
				d.log.Warn("webhook: keep the deliveries for after a restart", "err", err)
			}
		}
		if len(ops) > 0 {
			continue
		}
		select {
		case <-d.keepWake:
		case <-d.ctx.Done():
			d.keepMu.Lock()
			left := len(d.keepOps)
			d.keepMu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// Close stops delivering; what is still queued is dropped here, and kept by
// the Keeper, if any, for the next start.
func (d *Dispatcher) Close() {
	d.stop()
	d.wg.Wait()
}
