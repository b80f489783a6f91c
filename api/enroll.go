package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// EnrollState is where an enrollment stands.
type EnrollState string

// The states of an enrollment. A pending one whose code is past its expiry
// reads as expired; nothing is stored for that.
const (
	// EnrollPending: the join code is out and not used yet.
	EnrollPending EnrollState = "pending"
	// EnrollExpired: the join code was not used in time.
	EnrollExpired EnrollState = "expired"
	// EnrollJoined: a host joined with the code and holds the identity.
	EnrollJoined EnrollState = "joined"
	// EnrollRevoked: the identity (or the unused code) was revoked.
	EnrollRevoked EnrollState = "revoked"
)

// EnrollRequest asks for a one-time join code for a new agent host
// (POST /api/v1/enrollments).
type EnrollRequest struct {
	// AgentID is the id the new agent gets; the code is bound to it.
	AgentID string `json:"agent_id"`
	// Type is the agent type it is bound to.
	Type envelope.AgentType `json:"type"`
	// Labels are written into the new agent's config.
	Labels map[string]string `json:"labels,omitempty"`
	// TTL is how long the code may be used, as a Go duration ("1h"); "" means
	// one hour, and at most a week is allowed.
	TTL string `json:"ttl,omitempty"`
}

// Enrollment is one host's enrollment as the API shows it: who enrolled and
// revoked it, and when. It holds no secret.
type Enrollment struct {
	AgentID   string             `json:"agent_id"`
	Type      envelope.AgentType `json:"type"`
	Labels    map[string]string  `json:"labels,omitempty"`
	State     EnrollState        `json:"state"`
	CreatedBy string             `json:"created_by,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	ExpiresAt time.Time          `json:"expires_at"`
	// JoinedAt, JoinedFrom and PublicKey say when, from which address and
	// with which NATS public key the host joined.
	JoinedAt   *time.Time `json:"joined_at,omitempty"`
	JoinedFrom string     `json:"joined_from,omitempty"`
	PublicKey  string     `json:"public_key,omitempty"`
	RevokedBy  string     `json:"revoked_by,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// EnrollCode is the answer to an EnrollRequest: the code, shown this once.
type EnrollCode struct {
	// Code is the one-time join code: a secret until it is used or expires.
	Code       string     `json:"code"`
	Enrollment Enrollment `json:"enrollment"`
	// CAFingerprint is the site CA's (CAFingerprint), which the joining host
	// checks the orchestrator's certificate against.
	CAFingerprint string `json:"ca_fingerprint"`
}

// JoinRequest is a new host's join (POST /api/v1/join): the code, and the
// public half of the NATS key it made; the seed never leaves the host.
type JoinRequest struct {
	Code string `json:"code"`
	// AgentID, when set, is the id the host expects the code to be for.
	AgentID string `json:"agent_id,omitempty"`
	// PublicKey is the host's NATS user public key ("U...").
	PublicKey string `json:"public_key"`
}

// JoinGrant is what a host that joined receives: exactly what it must hold to
// run as its agent, and nothing of anyone else's.
type JoinGrant struct {
	AgentID string             `json:"agent_id"`
	Type    envelope.AgentType `json:"type"`
	Labels  map[string]string  `json:"labels,omitempty"`
	// NATSURLs and Prefix are where the agent connects and its subjects' prefix.
	NATSURLs []string `json:"nats_urls"`
	Prefix   string   `json:"prefix,omitempty"`
	// UserJWT is the host's NATS identity, signed for its public key; with the
	// seed it kept, it makes its .creds file.
	UserJWT string `json:"user_jwt"`
	// Token is the agent's own token; OrchestratorToken the orchestrator's for
	// it (only this agent accepts it).
	Token             string `json:"token"`
	OrchestratorToken string `json:"orchestrator_token"`
	// CAPEM is the site CA's certificate, which the broker's certificate is
	// signed with.
	CAPEM string `json:"ca_pem"`
}

// Errors of enrollment, join and revocation.
var (
	// ErrJoinCodeUnknown: no enrollment has this code.
	ErrJoinCodeUnknown = errors.New("unknown join code")
	// ErrJoinCodeUsed: a host joined with the code already.
	ErrJoinCodeUsed = errors.New("this join code was already used")
	// ErrJoinCodeRevoked: the code, or the identity it made, was revoked.
	ErrJoinCodeRevoked = errors.New("this join code was revoked")
	// ErrJoinCodeExpired: the code's time is up.
	ErrJoinCodeExpired = errors.New("this join code has expired")
	// ErrJoinOtherAgent: the code is for another agent id than the host expects.
	ErrJoinOtherAgent = errors.New("this join code is for another agent id")
	// ErrEnrolled: the id is in the config, or enrolled or joined already.
	ErrEnrolled = errors.New("agent id already in use")
	// ErrNoKey: an agent of the config names no public_key, so its NATS key
	// cannot be revoked.
	ErrNoKey = errors.New("no NATS key to revoke")
	// ErrRevoked: the enrollment was revoked already.
	ErrRevoked = errors.New("already revoked")
	// ErrNoEnrollment: the orchestrator cannot enroll (its config has no enroll
	// section: the site's broker lists its users in broker.conf).
	ErrNoEnrollment = errors.New("this orchestrator cannot enroll hosts: its config has no enroll section (a site made with chiffon init --operator has one)")
)

// ParseFingerprint reads a CA fingerprint: the SHA-256 of the certificate as
// 64 hex digits, with or without colons and a "SHA256:" prefix.
func ParseFingerprint(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "SHA256:"), "sha256:")
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) != sha256.Size {
		return nil, errors.New("want the CA's SHA-256 fingerprint: 64 hex digits, colons allowed")
	}
	return b, nil
}

// CAFingerprint is a certificate's SHA-256 fingerprint as ParseFingerprint reads
// it, in upper-case hex pairs joined by colons.
func CAFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return "SHA256:" + strings.Join(parts, ":")
}
