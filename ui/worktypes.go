package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// offer is one agent type and the work types its agents offer, as the API
// lists them.
type offer struct {
	Type      string
	WorkTypes []api.WorkType
}

// workTypes lists the work types the agents offer, by agent type and name.
func (u *UI) workTypes(ctx context.Context, sess *session) ([]api.WorkType, error) {
	var wts []api.WorkType
	err := u.call(ctx, sess, http.MethodGet, "/api/v1/work-types", nil, &wts)
	return wts, err
}

// workType is one work type of an agent type, or nil when none of its agents
// offers it or it cannot be read.
func (u *UI) workType(ctx context.Context, sess *session, agentType, name string) *api.WorkType {
	var wt api.WorkType
	path := "/api/v1/work-types/" + url.PathEscape(agentType) + "/" + url.PathEscape(name)
	if err := u.call(ctx, sess, http.MethodGet, path, nil, &wt); err != nil {
		return nil
	}
	return &wt
}

// offers groups work types by agent type, in the API's order.
func offers(wts []api.WorkType) []offer {
	var out []offer
	for _, wt := range wts {
		if n := len(out); n == 0 || out[n-1].Type != string(wt.AgentType) {
			out = append(out, offer{Type: string(wt.AgentType)})
		}
		out[len(out)-1].WorkTypes = append(out[len(out)-1].WorkTypes, wt)
	}
	return out
}

// target is the submit form's name of a work type: "agent type/work type".
func target(wt api.WorkType) string { return string(wt.AgentType) + "/" + wt.Name }

// offered is one work type of one agent, as the agents' pages show it.
type offered struct {
	Name string
	// Target is the submit form's choice of it.
	Target string
	// Description is what the agent says it does.
	Description string
	// Approval says a task of it on this agent waits for an operator's yes.
	Approval bool
	// Declared is false when the agent sent no catalogue: nothing is known of
	// it but its name.
	Declared bool
}

// offeredBy is each agent's work types, by agent id, in the order its
// registration lists them, with what the catalogue wts says of them.
func offeredBy(agents []api.AgentInfo, wts []api.WorkType) map[string][]offered {
	byTarget := make(map[string]api.WorkType, len(wts))
	for _, wt := range wts {
		byTarget[target(wt)] = wt
	}
	out := make(map[string][]offered, len(agents))
	for _, a := range agents {
		list := make([]offered, 0, len(a.WorkTypes))
		for _, name := range a.WorkTypes {
			o := offered{Name: name, Target: string(a.Type) + "/" + name}
			if wt, ok := byTarget[o.Target]; ok && slices.Contains(wt.Agents, a.ID) && !slices.Contains(wt.Undeclared, a.ID) {
				spec := specOf(wt, a.ID)
				o.Declared, o.Description = true, spec.Description
				o.Approval = wt.Approval == worktype.ApprovalRequired || slices.Contains(wt.ApprovalAgents, a.ID)
			}
			list = append(list, o)
		}
		out[a.ID] = list
	}
	return out
}

// specOf is the spec agent declares for wt: its variant's, when the agents
// disagree.
func specOf(wt api.WorkType, agent string) worktype.Spec {
	for _, v := range wt.Variants {
		if slices.Contains(v.Agents, agent) {
			return v.Spec
		}
	}
	return wt.Spec
}
