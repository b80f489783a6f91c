package enroll

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
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

// Revoke revokes agent id on behalf of caller: an unused code is void; a
// joined host's NATS key, or the public_key of an agent of the config, is
// revoked at the broker (which closes its connection), its tokens are dropped
// and the running core forgets it, its tasks in flight failing. The record
// stays, saying who revoked it and when.
func (e *Enroller) Revoke(ctx context.Context, id, caller string) (*api.Enrollment, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err := e.get(id)
	if errors.Is(err, task.ErrNotFound) {
		rec, err = e.configRecord(id)
	}
	if err != nil {
		return nil, err
	}
	was := stateAt(rec, e.now())
	next, err := decide(was, revokeEvent)
	if err != nil {
		return nil, err
	}
	if was == api.EnrollJoined {
		if err := e.p.Authority.Revoke(ctx, rec.PublicKey); err != nil {
			return nil, fmt.Errorf("revoke %s's NATS key at the broker: %w", id, err)
		}
	}
	now := e.now()
	gone := *rec
	gone.State, gone.RevokedBy, gone.RevokedAt = next, caller, &now
	if gone.CodeHash != "" {
		gone.UsedHash, gone.CodeHash = gone.CodeHash, ""
	}
	gone.Token, gone.OrchestratorToken = "", ""
	if err := e.put(&gone); err != nil {
		return nil, err
	}
	if agents := e.p.Agents(); agents != nil {
		agents.Forget(id, revokedWhy(&gone))
	}
	e.p.Log.Warn("host revoked", "agent_id", id, "by", caller, "was", was)
	v := e.view(&gone)
	return &v, nil
}

// configRecord is the record of agent id of the config, made to revoke it:
// joined, with the key its entry names. task.ErrNotFound when id is not in the
// config.
func (e *Enroller) configRecord(id string) (*record, error) {
	conf := e.configured(id)
	switch {
	case conf == nil:
		return nil, task.ErrNotFound
	case conf.PublicKey == "":
		return nil, fmt.Errorf("%w: agent %s is in the orchestrator's config without public_key, so its NATS key is unknown here: "+
			"add it (chiffon init --operator --force writes it) or remove the agent from the config and its .creds from its host",
			api.ErrNoKey, id)
	}
	return &record{Enrollment: api.Enrollment{AgentID: id, Type: conf.Type, State: api.EnrollJoined,
		CreatedBy: "(config)", PublicKey: conf.PublicKey}}, nil
}

// revokedWhy is the error of the tasks a revoked agent had in flight.
func revokedWhy(r *record) string {
	by := ""
	if r.RevokedBy != "" {
		by = " by " + r.RevokedBy
	}
	return fmt.Sprintf("agent %s was revoked%s: whether the task ran there is unknown", r.AgentID, by)
}
