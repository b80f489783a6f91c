package api

// ErrorBody is the JSON body of every API error.
type ErrorBody struct {
	Error APIErrorDetail `json:"error"`
}

// APIErrorDetail says what went wrong: a short code, the field at fault (when one
// is), and a message.
type APIErrorDetail struct {
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
	// Pointer is the JSON pointer of the failing value within Field, when
	// Field is an object such as the parameters: "/n".
	Pointer string `json:"pointer,omitempty"`
	Message string `json:"message"`
	// Candidates are the whole ids a short id or a prefix names, when it names
	// more than one (code ambiguous_id).
	Candidates []string `json:"candidates,omitempty"`
}

// DecisionRequest is the optional body of an approval or a rejection.
type DecisionRequest struct {
	// Note says why; it is kept on the task.
	Note string `json:"note,omitempty"`
}

// CancelRequest is the optional body of a cancel.
type CancelRequest struct {
	// Reason says why; it goes to the agent, which ends the task's output with it,
	// and into the task's events. "" is "cancelled by operator".
	Reason string `json:"reason,omitempty"`
}
