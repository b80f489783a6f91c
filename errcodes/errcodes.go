// Package errcodes defines the Chiffon protocol's error codes (5001-5006) and a typed
// error that carries a code, a message and the code's context fields.
//
// Every failure that crosses the wire is an *Error. It works with errors.Is against a
// Code and with errors.As against *Error:
//
//	if errors.Is(err, errcodes.Timeout) { ... }
//	var e *errcodes.Error
//	if errors.As(err, &e) && e.Code.Retryable() { ... }
package errcodes

import (
	"fmt"
	"strconv"
)

// Code is a protocol error code. A Code is itself an error, so that errors.Is(err, code)
// reports whether err carries that code.
type Code int

// The error codes of protocol v1.0.
const (
	// Timeout: no response from the agent within the deadline.
	Timeout Code = 5001
	// AgentUnavailable: no connection to the agent, or the broker is down.
	AgentUnavailable Code = 5002
	// InvalidMessage: malformed JSON, a missing field or a value of the wrong shape.
	InvalidMessage Code = 5003
	// AuthenticationFailed: a missing or wrong bearer token.
	AuthenticationFailed Code = 5004
	// ResourceLimitExceeded: the agent lacks the capacity, memory or VRAM asked for.
	ResourceLimitExceeded Code = 5005
	// UnsupportedWorkType: the agent does not offer the work type, or does not speak
	// the envelope's protocol version.
	UnsupportedWorkType Code = 5006
)

// MinCode and MaxCode bound the range the protocol reserves for error codes.
const (
	MinCode Code = 5001
	MaxCode Code = 5999
)

var names = map[Code]string{
	Timeout:               "Timeout",
	AgentUnavailable:      "Agent Unavailable",
	InvalidMessage:        "Invalid Message",
	AuthenticationFailed:  "Authentication Failed",
	ResourceLimitExceeded: "Resource Limit Exceeded",
	UnsupportedWorkType:   "Unsupported Work Type",
}

// Name returns the code's name from the protocol table, or "Error <code>" for a code
// the protocol does not name.
func (c Code) Name() string {
	if n, ok := names[c]; ok {
		return n
	}
	return "Error " + strconv.Itoa(int(c))
}

// Retryable reports whether the protocol allows retrying a request that failed with c.
// Only 5001, 5002 and 5005 are retryable.
func (c Code) Retryable() bool {
	return c == Timeout || c == AgentUnavailable || c == ResourceLimitExceeded
}

// Known reports whether c is one of the six codes the protocol defines.
func (c Code) Known() bool {
	_, ok := names[c]
	return ok
}

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return strconv.Itoa(int(c)) + " " + c.Name() }

// String returns the code and its name, such as "5003 Invalid Message".
func (c Code) String() string { return c.Error() }

// Context keys used by the constructors, as the protocol's table names them.
const (
	KeyAttemptedRetries  = "attempted_retries"
	KeyLastAttempt       = "last_attempt"
	KeyAgentID           = "agent_id"
	KeyLastHeartbeat     = "last_heartbeat"
	KeyValidationError   = "validation_error"
	KeyFieldName         = "field_name"
	KeyTokenStatus       = "token_status"
	KeyLimitName         = "limit_name"
	KeyAvailable         = "available"
	KeyRequired          = "required"
	KeyWorkTypeRequested = "work_type_requested"
	KeySupportedTypes    = "supported_types"
	KeyVersionRequested  = "protocol_version_requested"
)

// Error is a protocol error: a code, a human-readable message and the code's context.
type Error struct {
	// Code is the protocol error code.
	Code Code
	// Message is the human-readable error_message. It never holds a secret.
	Message string
	// Context holds the error_context fields; nil when there are none.
	Context map[string]any
}

// New returns an error with the given code and message and no context.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error formats the error as "<code> <name>: <message>", adding the field for a 5003.
func (e *Error) Error() string {
	if f := e.Field(); f != "" {
		return fmt.Sprintf("%d %s: %s: %s", int(e.Code), e.Code.Name(), f, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", int(e.Code), e.Code.Name(), e.Message)
}

// Is reports whether target is e's Code, or an *Error with the same Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t != nil && e.Code == t.Code
	}
	return false
}

// Retryable reports whether the protocol allows retrying after e.
func (e *Error) Retryable() bool { return e.Code.Retryable() }

// Field returns the dotted JSON path in the field_name context entry, or "".
func (e *Error) Field() string {
	s, _ := e.Context[KeyFieldName].(string)
	return s
}

// With returns e after setting one context entry. It is meant for building errors.
func (e *Error) With(key string, value any) *Error {
	if e.Context == nil {
		e.Context = make(map[string]any, 2)
	}
	e.Context[key] = value
	return e
}
