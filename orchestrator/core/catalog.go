package core

import (
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/catalog"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/worktype"
)

// The catalogue (package catalog): what the registered agents say of the work
// types they offer. The loop makes its next snapshot at each registration
// (register); submissions and the API read the latest without the loop.

// newCatalog is the catalogue before any registration, for o's configured
// agents.
func (o *Core) newCatalog() *catalog.Snapshot {
	configured := make(map[string]envelope.AgentType, len(o.known()))
	for id, s := range o.known() {
		configured[id] = s.Type
	}
	return catalog.New(configured)
}

// setCatalog makes a's entry of the catalogue, with what it declares of the
// work types it is allowed, and renews the catalogue's snapshot (catalog.go).
func (o *Core) setCatalog(a *agentEntry, declared map[string]worktype.Declared) {
	var kept map[string]worktype.Declared
	if declared != nil {
		kept = make(map[string]worktype.Declared, len(a.workTypes))
		for _, w := range a.workTypes {
			if d, ok := declared[w]; ok {
				kept[w] = d
			}
		}
	}
	var approval []string
	if a.conf != nil {
		approval = a.conf.ApprovalRequired
	}
	snap := o.catalog.Load().With(a.id, catalog.NewAgent(a.typ, a.workTypes, kept, approval))
	o.catalog.Store(snap)
	a.cat = snap.Agent(a.id)
}

// asksApproval reports whether a takes workType only once approved: its config
// entry's approval_required lists it, or it declares so itself.
func (a *agentEntry) asksApproval(workType string) bool { return a.cat.AsksApproval(workType) }

// stopGrace is how long a gives a task of workType's processes to stop after
// their deadline (catalog.Agent.StopGrace).
func (a *agentEntry) stopGrace(workType string) time.Duration { return a.cat.StopGrace(workType) }

// CheckWorkType refuses req, valid, when the catalogue says its target cannot
// take it (catalog.Snapshot.Check): the refusal is an *api.WorkTypeError.
func (o *Core) CheckWorkType(req *api.SubmitRequest) error { return o.catalog.Load().Check(req) }

// WorkTypes lists the work types the registered agents offer, by agent type
// and name, with what they declare of each (api.WorkType).
func (o *Core) WorkTypes() []api.WorkType {
	return o.catalog.Load().WorkTypes(func(workType string) bool {
		return o.cfg.WorkTypes[workType].Approval == policy.ApprovalRequired
	})
}
