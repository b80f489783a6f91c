package orchestrator

import (
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/ha"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/nats-io/nats.go"
)

// More than one orchestrator. With ha.enabled, the orchestrators of a site share
// an id (so the agents answer the same task subjects) and the JetStream store,
// and the store elects one of them (jsstore.Store.Elect). The leader runs the core:
// it subscribes to the registry and the task inboxes, resumes every unfinished
// task from the store (re-sent with its request_id: the agents' dedupe caches
// answer), dispatches and times out. A standby has none of it: it serves reads
// from the store, follows a task's events in the store for SSE, and forwards a
// submit, a cancel or the agent list to the leader over NATS (httpapi/forward.go).
//
// The store fences the leader's writes by its term, so a leader that lost the
// lead without knowing it writes nothing; and publish sends nothing to an agent
// once the store's lease has lapsed by this process's clock. When the store says
// the lead is lost, the core stops: its subscriptions go, and its runs, agents,
// queues and SSE streams are dropped (the clients resume with Last-Event-ID).

// DefaultLease is ha.lease when unset: long enough that the crash of the NATS
// node leading the task stream (a new stream leader is elected in up to about
// 10 s) costs no leadership (docs/operations.md, "What a lease costs").
const DefaultLease = 20 * time.Second

// HAConfig runs several orchestrators of one site, one leading.
type HAConfig struct {
	// Enabled makes this orchestrator one of a group sharing id and the
	// JetStream store (store.kind jetstream), which elects the leader.
	Enabled bool `yaml:"enabled"`
	// Lease is how long a leader leads without renewing; 0 means DefaultLease.
	// A standby takes over three quarters of a lease to a lease and a second
	// after the leader stops: the leader renews every quarter lease, and a
	// standby looks every quarter lease (at least every second).
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

// startHA joins the election: the group runs a core while this orchestrator
// leads (package ha).
func (o *Orchestrator) startHA() error {
	js, ok := o.st.(*jsstore.Store)
	if !ok {
		return errors.New("ha.enabled needs the JetStream task store")
	}
	o.metrics.SetLeader(false)
	o.ha = ha.New(ha.Params{Store: js, API: o.cfg.HA.AdvertiseURL, Lease: o.cfg.HA.Lease,
		Lead: o.lead, Stop: o.stepDown, Log: o.log})
	return o.ha.Join()
}

// stepDown drops the core: no more messages come in, and every live thing
// goes with it. The tasks stay in the store for the next leader.
func (o *Orchestrator) stepDown() {
	o.stop()
	o.metrics.SetLeader(false)
}

// serving reports whether this orchestrator runs the core and serves submit and
// cancel itself.
func (o *Orchestrator) serving() bool { return o.running.Load() != nil }

// Role returns what the orchestrator is in its group.
func (o *Orchestrator) Role() api.Role {
	if o.ha == nil {
		return api.Role{}
	}
	return o.ha.Role(o.serving())
}

// handleForwarded serves a request a standby forwarded (package httpapi), off
// the subscription's goroutine (a submit waits for its commit), on one the
// Close of c, the core whose subscription it came on, waits for.
func (o *Orchestrator) handleForwarded(c *core.Core, msg *nats.Msg) {
	if !broker.InInbox(msg.Reply, o.subj.ForwardReplies()) {
		o.metrics.ForeignReplies.Inc()
		o.authLog.Warn("foreign-reply", "forwarded request not served: its reply subject is not a forwarding inbox", "reply", msg.Reply)
		return
	}
	c.Go(func() { o.api.AnswerForwarded(msg) })
}
