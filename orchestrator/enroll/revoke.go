package enroll

import (
	"context"
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

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
// joined, with the key its entry names. notEnrolled (task.ErrNotFound) when id is not in the
// config.
func (e *Enroller) configRecord(id string) (*record, error) {
	conf := e.configured(id)
	switch {
	case conf == nil:
		return nil, notEnrolled(id)
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
