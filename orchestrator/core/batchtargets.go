package core

import (
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
)

// BatchTargets lists the agents req matches now, by id: the online ones
// offering its work type with no state yet (they get a task), the others with
// theirs (offline, unsupported, unknown, or registering: configured and not
// online with this core yet, unregistered or registered with its first
// heartbeat to come).
func (o *Core) BatchTargets(req *api.BatchRequest) ([]api.BatchTarget, error) {
	var out []api.BatchTarget
	if err := o.call(func() { out = o.batchTargets(req) }); err != nil {
		return nil, err
	}
	return out, nil
}

// batchTargets is BatchTargets on the loop.
func (o *Core) batchTargets(req *api.BatchRequest) []api.BatchTarget {
	var out []api.BatchTarget
	// pinned are the agents req names; named those of them not listed yet.
	pinned, named := map[string]bool{}, map[string]bool{}
	for _, id := range req.Agents {
		pinned[id], named[id] = true, true
	}
	for _, a := range o.byType[req.ToAgent] {
		if a.typ != req.ToAgent || len(pinned) > 0 && !pinned[a.id] || !hasLabels(a.labels, req.Labels) {
			continue
		}
		delete(named, a.id)
		t := api.BatchTarget{AgentID: a.id}
		switch {
		case !a.online && a.lastHB == nil:
			t.State = api.TargetRegistering // registered, its first heartbeat to come
		case !a.online:
			t.State = api.TargetOffline
		case !a.offers(req.WorkType):
			t.State = api.TargetUnsupported
		}
		out = append(out, t)
	}
	for _, c := range o.cfg.Agents {
		never := o.agents[c.ID] == nil
		if !named[c.ID] && (len(req.Agents) > 0 || len(req.Labels) > 0 || c.Type != req.ToAgent || !never) {
			continue
		}
		delete(named, c.ID)
		t := api.BatchTarget{AgentID: c.ID, State: api.TargetUnknown} // named, of another type or labels
		if never {
			t.State = api.TargetRegistering // configured, not registered yet
		}
		out = append(out, t)
	}
	for id := range named {
		out = append(out, api.BatchTarget{AgentID: id, State: api.TargetUnknown})
	}
	slices.SortFunc(out, func(a, b api.BatchTarget) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
