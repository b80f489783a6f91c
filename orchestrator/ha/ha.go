// Package ha runs an orchestrator as one of a group. The orchestrators of a
// site share an id (so the agents answer the same task subjects) and the
// JetStream task store, whose election (jsstore.Store.Elect) picks the leader.
// Each term the store gives this orchestrator, Group runs its Lead; when the
// term ends (the lease lost, or a new term begun), it runs Stop, and the
// leader's core goes whole with it. A standby runs no core: it serves reads
// from the store and forwards the rest to the leader.
//
// The store fences the leader's writes by its term, so a leader that lost the
// lead without knowing it writes nothing; and Leading turns false, so the core
// sends nothing to an agent, once the store's lease has lapsed by this
// process's clock.
package ha

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/nats-io/nuid"
)

// retryLead is how long a term whose Lead failed waits to try again.
const retryLead = time.Second

// Params are what a Group runs with.
type Params struct {
	// Store is the group's JetStream task store, which holds the election.
	Store *jsstore.Store
	// API is where this orchestrator's HTTP API is reached, shown by the
	// others while it leads.
	API string
	// Lease is how long a leader leads without renewing.
	Lease time.Duration
	// Lead starts leading: it runs a fresh core. On an error the Group runs
	// Stop and tries again a second later, while the term lasts.
	Lead func() error
	// Stop drops what Lead started.
	Stop func()
	Log  *slog.Logger
}

// Group is this orchestrator's part in its group, from New and Join to Close.
type Group struct {
	p    Params
	name string

	mu     sync.Mutex
	want   bool   // the store leads
	term   uint64 // counts the store's terms
	wake   chan struct{}
	done   chan struct{}
	exited chan struct{}
}

// New makes this orchestrator's part in its group, under a name of its own
// (the host's name and a random suffix), a standby until Join.
func New(p Params) *Group {
	host, _ := os.Hostname()
	return &Group{p: p, name: host + "-" + nuid.Next()[:8], wake: make(chan struct{}, 1),
		done: make(chan struct{}), exited: make(chan struct{})}
}

// Join joins the election and follows it until Close.
func (g *Group) Join() error {
	g.p.Log.Info("standby: joining the election", "name", g.name, "lease", g.p.Lease)
	go g.follow()
	return g.p.Store.Elect(jsstore.ElectOptions{Name: g.name, API: g.p.API, Lease: g.p.Lease,
		OnLead: func() { g.set(true) },
		OnLose: func(error) { g.set(false) }})
}

// Name is this orchestrator's name in the group.
func (g *Group) Name() string { return g.name }

// Leading reports whether the store's lease holds by this process's clock:
// whether a core may send to agents.
func (g *Group) Leading() bool { return g.p.Store.Leading() }

// Role says what this orchestrator is in its group; serving says it runs a
// core now.
func (g *Group) Role(serving bool) api.Role {
	r := api.Role{Role: "standby"}
	if serving {
		r.Role = "leader"
	}
	if l, ok := g.p.Store.Leader(); ok {
		r.Leader = &api.Leader{Name: l.Name, API: l.API, Term: l.Term, Since: l.Since, LeaseMS: l.LeaseMS, Resigned: l.Resigned}
	}
	return r
}

// Close stops following the election and returns once no Lead or Stop runs;
// what the last Lead started is the caller's to stop. It is called once,
// after Join.
func (g *Group) Close() {
	close(g.done)
	<-g.exited
}

// set records what the store says; it runs on the store's writer, so it only
// wakes follow.
func (g *Group) set(lead bool) {
	g.mu.Lock()
	g.want = lead
	if lead {
		g.term++
	}
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// follow runs Lead when the store leads and Stop when it stops leading (or
// leads again in a new term, whose core starts afresh from the store), until
// Close.
func (g *Group) follow() {
	defer close(g.exited)
	var running uint64 // the term whose core runs; 0: none
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-g.wake:
		case <-retry.C:
		}
		g.mu.Lock()
		want, term := g.want, g.term
		g.mu.Unlock()
		if running != 0 && (!want || running != term) {
			g.p.Stop()
			g.p.Log.Warn("standby: no longer leading; the core is stopped")
			running = 0
		}
		if want && running == 0 {
			g.p.Log.Info("leading: resuming the unfinished tasks from the store")
			if err := g.p.Lead(); err != nil {
				g.p.Log.Error("leading: start", "err", err)
				g.p.Stop()
				retry.Reset(retryLead)
				continue
			}
			running = term
		}
	}
}
