package orchestrator

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// More than one orchestrator. With ha.enabled, the orchestrators of a site share
// an id (so the agents answer the same task subjects) and the JetStream store,
// and the store elects one of them (jsstore.Store.Elect). The leader runs the core:
// it subscribes to the registry and the task inboxes, resumes every unfinished
// task from the store (re-sent with its request_id: the agents' dedupe caches
// answer), dispatches and times out. A standby has none of it: it serves reads
// from the store, follows a task's events in the store for SSE, and forwards a
// submit, a cancel or the agent list to the leader over NATS (forward.go).
//
// The store fences the leader's writes by its term, so a leader that lost the
// lead without knowing it writes nothing; and publish sends nothing to an agent
// once the store's lease has lapsed by this process's clock. When the store says
// the lead is lost, the core stops: its subscriptions go, and its runs, agents,
// queues and SSE streams are dropped (the clients resume with Last-Event-ID).

// DefaultLease is ha.lease when unset.
const DefaultLease = 5 * time.Second

// HAConfig runs several orchestrators of one site, one leading.
type HAConfig struct {
	// Enabled makes this orchestrator one of a group sharing id and the
	// JetStream store (store.kind jetstream), which elects the leader.
	Enabled bool `yaml:"enabled"`
	// Lease is how long a leader leads without renewing; 0 means 5 s. A standby
	// takes over two thirds of a lease to a lease and a half after the leader
	// stops: the leader renews every third of a lease, and a standby looks every
	// quarter lease (at least every second).
	Lease time.Duration `yaml:"lease"`
	// AdvertiseURL is where this orchestrator's HTTP API is reached, shown by the
	// others while it leads.
	AdvertiseURL string `yaml:"advertise_url"`
}

func (h HAConfig) validate(c Config) error {
	if !h.Enabled {
		return nil
	}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: ha.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if c.Store.Kind != StoreJetStream {
		return bad("enabled", "needs store.kind %s: the orchestrators share its stream", StoreJetStream)
	}
	if c.ID == "" {
		return fmt.Errorf("config: id: is required with ha.enabled: every orchestrator of the group sets the same one")
	}
	if h.Lease != 0 && h.Lease < jsstore.MinLease {
		return bad("lease", "must be at least %s, got %s", jsstore.MinLease, h.Lease)
	}
	return nil
}

// errNotLeading is publish's refusal to send while this orchestrator's lease
// is not held.
var errNotLeading = errors.New("this orchestrator does not lead")

// haState is an orchestrator's part in its group.
type haState struct {
	store *jsstore.Store
	name  string
	// active says the core runs: lead has started it and stepDown not yet
	// stopped it. The API serves submit and cancel itself only then.
	active atomic.Bool

	mu   sync.Mutex
	want bool   // the store leads
	term uint64 // counts the store's terms
	wake chan struct{}
}

// startHA joins the election; the role goroutine starts and stops the core as
// the store leads or not.
func (o *Orchestrator) startHA() error {
	js, ok := o.st.(*jsstore.Store)
	if !ok {
		return errors.New("ha.enabled needs the JetStream task store")
	}
	host, _ := os.Hostname()
	h := &haState{store: js, name: host + "-" + nuid.Next()[:8], wake: make(chan struct{}, 1)}
	o.ha = h
	o.metrics.leader.Set(0)
	// Every message to an agent says which orchestrator of the group sent it.
	// Nothing has been sent yet: the headers are not shared with anyone.
	for _, a := range o.sec.agents {
		a.header.Set(broker.HeaderInstance, h.name)
	}
	o.log.Info("standby: joining the election", "name", h.name, "lease", o.cfg.HA.Lease)
	o.wg.Add(1)
	go o.roles()
	return js.Elect(jsstore.ElectOptions{Name: h.name, API: o.cfg.HA.AdvertiseURL, Lease: o.cfg.HA.Lease,
		OnLead: func() { h.set(true) },
		OnLose: func(error) { h.set(false) }})
}

// set records what the store says; it runs on the store's writer, so it only
// wakes the role goroutine.
func (h *haState) set(lead bool) {
	h.mu.Lock()
	h.want = lead
	if lead {
		h.term++
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// roles starts the core when the store leads and stops it when it stops
// leading (or leads again in a new term, whose core starts afresh from the
// store), until the orchestrator closes.
func (o *Orchestrator) roles() {
	defer o.wg.Done()
	h := o.ha
	var running uint64 // the term whose core runs; 0: none
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-o.done:
			return
		case <-h.wake:
		case <-retry.C:
		}
		h.mu.Lock()
		want, term := h.want, h.term
		h.mu.Unlock()
		if running != 0 && (!want || running != term) {
			o.stepDown()
			running = 0
		}
		if want && running == 0 {
			if err := o.lead(); err != nil {
				o.log.Error("leading: start", "err", err)
				o.stepDown()
				retry.Reset(time.Second)
				continue
			}
			running = term
		}
	}
}

// lead starts the core, as Open does for a lone orchestrator.
func (o *Orchestrator) lead() error {
	o.log.Info("leading: resuming the unfinished tasks from the store")
	if err := o.start(); err != nil {
		return err
	}
	o.ha.active.Store(true)
	o.metrics.leader.Set(1)
	return o.startFleet()
}

// stepDown stops the core: no more messages come in, and every live thing goes.
// The tasks stay in the store for the next leader.
func (o *Orchestrator) stepDown() {
	o.fleet.Stop()
	o.ha.active.Store(false)
	o.metrics.leader.Set(0)
	o.unsubscribe()
	_ = o.call(func() {
		for _, r := range o.runs {
			r.stopTimers()
			r.dropped = true
		}
		for _, a := range o.agents {
			a.stopTimers()
		}
		clear(o.runs)
		clear(o.agents)
		clear(o.queues)
		for id, ws := range o.watchers {
			for w := range ws {
				w.close()
			}
			delete(o.watchers, id)
		}
	})
	o.log.Warn("standby: no longer leading; the core is stopped")
}

// leading reports whether this orchestrator may send to agents: always alone,
// and in a group while the store's lease holds by this process's clock.
func (o *Orchestrator) leading() bool {
	return o.ha == nil || o.ha.store.Leading()
}

// serving reports whether this orchestrator runs the core and serves submit and
// cancel itself.
func (o *Orchestrator) serving() bool {
	return o.ha == nil || o.ha.active.Load()
}

// Role returns what the orchestrator is in its group.
func (o *Orchestrator) Role() api.Role {
	if o.ha == nil {
		return api.Role{}
	}
	r := api.Role{Role: "standby"}
	if o.serving() {
		r.Role = "leader"
	}
	if l, ok := o.ha.store.Leader(); ok {
		r.Leader = &api.Leader{Name: l.Name, API: l.API, Term: l.Term, Since: l.Since, LeaseMS: l.LeaseMS, Resigned: l.Resigned}
	}
	return r
}

// subscribe subscribes fn to subject for the core; unsubscribe ends every such
// subscription. After Close, subscribe refuses.
func (o *Orchestrator) subscribe(subject string, fn nats.MsgHandler) error {
	o.subsMu.Lock()
	defer o.subsMu.Unlock()
	if o.subsClosed {
		return ErrClosed
	}
	sub, err := o.nc.Subscribe(subject, fn)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	sub.SetPendingLimits(-1, 256<<20)
	o.subs = append(o.subs, sub)
	return nil
}

func (o *Orchestrator) unsubscribe() {
	o.subsMu.Lock()
	defer o.subsMu.Unlock()
	for _, s := range o.subs {
		_ = s.Unsubscribe()
	}
	o.subs = nil
}
