package enroll

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"maps"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/nats-io/nkeys"
)

// newCode is a join code: 26 base32 characters from crypto/rand (130 bits).
func newCode() string { return rand.Text() }

// checkRequest checks an enrollment request and returns its code's lifetime.
func checkRequest(req api.EnrollRequest) (time.Duration, error) {
	if msg := envelope.CheckAgentID(req.AgentID); msg != "" {
		return 0, &api.FieldError{Field: "agent_id", Message: msg}
	}
	if !req.Type.Valid() || req.Type == envelope.Orchestrator {
		return 0, &api.FieldError{Field: "type", Message: fmt.Sprintf("want an agent type (infra, desktop, code, research), not %q", req.Type)}
	}
	for k, v := range req.Labels {
		if msg := envelope.CheckLabel(k, v); msg != "" {
			return 0, &api.FieldError{Field: "labels." + k, Message: msg}
		}
	}
	if req.TTL == "" {
		return DefaultTTL, nil
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl <= 0 || ttl > MaxTTL {
		return 0, &api.FieldError{Field: "ttl", Message: fmt.Sprintf("want a duration above 0 and at most %s, such as 1h", MaxTTL)}
	}
	return ttl, nil
}

// Join checks req's code and, when it holds, makes the host agent of the
// enrollment: its NATS identity signed for req's public key, a new token pair,
// the record joined and the agent admitted to the running core. from is the
// host's address, kept in the record. A code joins once: a second join, an
// expired code or a code for another id than the host expects is refused and
// changes nothing.
func (e *Enroller) Join(req api.JoinRequest, from string) (*api.JoinGrant, error) {
	if !nkeys.IsValidPublicUserKey(req.PublicKey) {
		return nil, &api.FieldError{Field: "public_key", Message: "want a NATS user public key (56 characters starting with U)"}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := e.byCode(req.Code)
	if err != nil {
		return nil, err
	}
	if req.AgentID != "" && req.AgentID != rec.AgentID {
		return nil, fmt.Errorf("%w: the host expects %s", api.ErrJoinOtherAgent, req.AgentID)
	}
	next, err := decide(stateAt(rec, e.now()), joinEvent)
	if err != nil {
		return nil, err
	}
	jwt, err := e.p.Authority.IssueUser(broker.Identity{Role: broker.RoleAgent, Name: rec.AgentID}, req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("sign the host's NATS identity: %w", err)
	}
	now := e.now()
	joined := *rec
	joined.State, joined.JoinedAt, joined.JoinedFrom, joined.PublicKey = next, &now, from, req.PublicKey
	joined.UsedHash, joined.CodeHash = rec.CodeHash, ""
	joined.Token, joined.OrchestratorToken = broker.NewToken(), broker.NewToken()
	if err := e.put(&joined); err != nil {
		return nil, err
	}
	if agents := e.p.Agents(); agents != nil {
		agents.Admit(agentConfig(&joined))
	}
	e.p.Log.Info("host joined", "agent_id", joined.AgentID, "type", joined.Type, "from", from, "public_key", req.PublicKey)
	return &api.JoinGrant{AgentID: joined.AgentID, Type: joined.Type, Labels: maps.Clone(joined.Labels),
		NATSURLs: e.p.NATSURLs, Prefix: e.p.Prefix, UserJWT: jwt, Token: joined.Token,
		OrchestratorToken: joined.OrchestratorToken, CAPEM: string(e.p.CAPEM)}, nil
}

// byCode finds the enrollment whose code is code, used or not, comparing the
// hashes in constant time; ErrJoinCodeUnknown when none has it.
func (e *Enroller) byCode(code string) (*record, error) {
	if code == "" {
		return nil, &api.FieldError{Field: "code", Message: "required"}
	}
	recs, err := e.all()
	if err != nil {
		return nil, err
	}
	h := []byte(hashCode(code))
	for _, r := range recs {
		if subtle.ConstantTimeCompare(h, []byte(r.CodeHash)) == 1 || subtle.ConstantTimeCompare(h, []byte(r.UsedHash)) == 1 {
			return r, nil
		}
	}
	return nil, api.ErrJoinCodeUnknown
}
