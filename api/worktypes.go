package api

import (
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// WorkType is a work type of one agent type as the API shows it: what the
// agents of that type that offer it said in their registrations.
type WorkType struct {
	AgentType envelope.AgentType `json:"agent_type"`
	Name      string             `json:"name"`
	// Spec is the description, parameter schema and approval the agents
	// declare: when they disagree, that of the first agent by id (see Variants).
	worktype.Spec
	// Its Approval is "required" when every task of it waits for an operator's
	// yes (the orchestrator's work_types.<name>.approval); "" otherwise, and
	// then ApprovalAgents lists the agents that ask for approval of it
	// (approval_required in their config entry, or their own declaration): a
	// task pinned to one waits for a yes, an unpinned one is not sent there.
	ApprovalAgents []string `json:"approval_agents,omitempty"`
	// Agents are the agents offering it, by id, online or not.
	Agents []string `json:"agents"`
	// Undeclared are the agents offering it that sent no catalogue (older
	// agents): their parameters are checked only by themselves.
	Undeclared []string `json:"undeclared,omitempty"`
	// Variants, when the agents offering it declare different specs, are each
	// spec with the agents declaring it; a task must satisfy every variant's
	// schema. Empty when they agree.
	Variants []WorkTypeVariant `json:"variants,omitempty"`
}

// WorkTypeVariant is one of the specs agents declare for a work type.
type WorkTypeVariant struct {
	worktype.Spec
	Agents []string `json:"agents"`
}

// WorkTypeError refuses a submission for its work type or its parameters, as
// the catalogue of the target's agents says: a work type none of them offers
// (Code "unknown_work_type", Field "work_type") or parameters a schema refuses
// (Code "invalid_parameter", Field "parameters", Pointer the failing value).
// The API answers it with 422.
type WorkTypeError struct {
	Code, Field, Pointer, Message string
}

func (e *WorkTypeError) Error() string {
	if e.Pointer != "" {
		return e.Field + " " + e.Pointer + ": " + e.Message
	}
	return e.Field + ": " + e.Message
}
