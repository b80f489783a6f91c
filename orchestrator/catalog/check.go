package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// Check refuses req, valid, when the catalogue says its target cannot take
// it: a work type that no agent of the type offers once all of them have
// registered (or that its pinned agent does not offer), or parameters that
// fail the schema of an agent offering it: every distinct schema when the
// agents declare different ones. The refusal is an *api.WorkTypeError. An
// agent type or a pinned agent not registered yet, and agents that declare no
// schema, leave the check to the agent.
func (s *Snapshot) Check(req *api.SubmitRequest) error {
	var groups []schemaGroup
	if pin := pinnedAgent(req); pin != "" {
		a := s.Agent(pin)
		if a == nil || a.Type != req.ToAgent {
			return nil // routing says what is wrong with the pin
		}
		if !slices.Contains(a.Offers, req.WorkType) {
			return unknownWorkType(fmt.Sprintf("agent %s does not offer work type %q", pin, req.WorkType), a.Offers)
		}
		if sc := a.schema(req.WorkType); sc != nil {
			groups = []schemaGroup{{schema: sc, ids: []string{pin}}}
		}
	} else {
		o := s.offering[req.ToAgent][req.WorkType]
		if o == nil {
			if !s.Complete(req.ToAgent) {
				return nil
			}
			return unknownWorkType(fmt.Sprintf("no %s agent offers work type %q", req.ToAgent, req.WorkType), s.Offered(req.ToAgent))
		}
		groups = o.schemas
	}
	for _, g := range groups {
		err := g.schema.Check(req.Parameters)
		if err == nil {
			continue
		}
		pe, ok := err.(*worktype.ParamError)
		if !ok {
			return err
		}
		msg := pe.Message
		if len(groups) > 1 {
			msg += " (the schema of agent " + g.ids[0] + ")"
		}
		return &api.WorkTypeError{Code: "invalid_parameter", Field: "parameters", Pointer: pe.Pointer, Message: msg}
	}
	return nil
}

func pinnedAgent(req *api.SubmitRequest) string {
	if req.Hints == nil {
		return ""
	}
	return req.Hints.AgentID
}

func unknownWorkType(what string, offered []string) *api.WorkTypeError {
	list := "none"
	if len(offered) > 0 {
		list = strings.Join(offered, ", ")
	}
	return &api.WorkTypeError{Code: "unknown_work_type", Field: "work_type",
		Message: what + "; offered: " + list}
}
