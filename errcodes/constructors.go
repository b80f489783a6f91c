package errcodes

import (
	"fmt"
	"time"
)

// NewTimeout returns a 5001 carrying how many retries were made and when the last
// attempt started.
func NewTimeout(message string, attemptedRetries int, lastAttempt time.Time) *Error {
	return &Error{Code: Timeout, Message: message, Context: map[string]any{
		KeyAttemptedRetries: attemptedRetries,
		KeyLastAttempt:      lastAttempt.UTC().Format(time.RFC3339Nano),
	}}
}

// NewAgentUnavailable returns a 5002 for agentID. lastHeartbeat is nil when the agent
// was never heard from, and is then encoded as null.
func NewAgentUnavailable(message, agentID string, lastHeartbeat *time.Time) *Error {
	var hb any
	if lastHeartbeat != nil {
		hb = lastHeartbeat.UTC().Format(time.RFC3339Nano)
	}
	return &Error{Code: AgentUnavailable, Message: message, Context: map[string]any{
		KeyAgentID:       agentID,
		KeyLastHeartbeat: hb,
	}}
}

// NewInvalidMessage returns a 5003 whose message is the validation error. field is the
// dotted JSON path of the offending field, or "" when no field applies (the text was
// not a JSON object), which is encoded as null.
func NewInvalidMessage(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	var f any
	if field != "" {
		f = field
	}
	return &Error{Code: InvalidMessage, Message: msg, Context: map[string]any{
		KeyValidationError: msg,
		KeyFieldName:       f,
	}}
}

// Token states for NewAuthenticationFailed.
const (
	TokenMissing = "missing"
	TokenInvalid = "invalid"
	TokenUnknown = "unknown_agent"
	// TokenWrongType: the agent registered as another type than its id is bound
	// to in the orchestrator's config.
	TokenWrongType = "wrong_agent_type"
	// TokenInstanceLive: another process with the same agent id is registered
	// and answers; a second instance is refused.
	TokenInstanceLive = "instance_already_live"
)

var authMessages = map[string]string{
	TokenMissing:      "bearer token missing",
	TokenInvalid:      "bearer token invalid",
	TokenUnknown:      "bearer token unknown_agent",
	TokenWrongType:    "agent id registered as another type than the orchestrator's config binds it to",
	TokenInstanceLive: "another instance with this agent id is live; a second one is refused",
}

// NewAuthenticationFailed returns a 5004 for agentID. tokenStatus says what was wrong
// (TokenMissing, TokenInvalid, TokenUnknown, TokenWrongType, TokenInstanceLive); the
// token itself is never included.
func NewAuthenticationFailed(agentID, tokenStatus string) *Error {
	msg, ok := authMessages[tokenStatus]
	if !ok {
		msg = "bearer token " + tokenStatus
	}
	return &Error{
		Code:    AuthenticationFailed,
		Message: msg,
		Context: map[string]any{KeyAgentID: agentID, KeyTokenStatus: tokenStatus},
	}
}

// NewResourceLimitExceeded returns a 5005 naming the limit and the amounts involved.
func NewResourceLimitExceeded(limitName string, available, required int64) *Error {
	return &Error{
		Code:    ResourceLimitExceeded,
		Message: fmt.Sprintf("%s: %d required, %d available", limitName, required, available),
		Context: map[string]any{
			KeyLimitName: limitName,
			KeyAvailable: available,
			KeyRequired:  required,
		},
	}
}

// NewUnsupportedWorkType returns a 5006 for a work type the agent does not offer.
func NewUnsupportedWorkType(requested string, supported []string) *Error {
	return &Error{
		Code:    UnsupportedWorkType,
		Message: fmt.Sprintf("unsupported work_type %q", requested),
		Context: map[string]any{
			KeyWorkTypeRequested: requested,
			KeySupportedTypes:    nonNil(supported),
		},
	}
}

// NewUnsupportedVersion returns a 5006 for a protocol version the receiver does not
// speak. The context names the field, the version asked for and the versions spoken.
func NewUnsupportedVersion(requested string, supported []string) *Error {
	return &Error{
		Code:    UnsupportedWorkType,
		Message: fmt.Sprintf("unsupported protocol_version %q", requested),
		Context: map[string]any{
			KeyFieldName:        "protocol_version",
			KeyVersionRequested: requested,
			KeySupportedTypes:   nonNil(supported),
		},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
