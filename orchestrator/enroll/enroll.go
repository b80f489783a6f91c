// Package enroll lets a new agent host join a site with a one-time code, and
// revokes a host for good. An operator enrolls an id of a type and gets a code
// bound to it; the host makes its NATS key, sends the public half with the
// code, and gets its NATS identity (a user JWT for its key), its token pair
// and the site CA. Revoking an id revokes its key at the broker, which closes
// its connection, and makes the orchestrator forget it and its tokens.
//
// Enrollments are records of the task store, one per agent id, kept after
// revocation: who enrolled and revoked whom. The package is a client of the
// core's API (Agents) and of the broker's authority (Authority).
package enroll

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Kind is the store's record kind of enrollments.
const Kind = "enrollment"

// Code lifetimes.
const (
	// DefaultTTL is a code's lifetime when the request gives none.
	DefaultTTL = time.Hour
	// MaxTTL is the longest lifetime a code may have.
	MaxTTL = 7 * 24 * time.Hour
)

// Records is where enrollments are kept: task.Store's records.
type Records interface {
	PutRecord(kind, id string, data []byte) error
	Record(kind, id string) ([]byte, error)
	Records(kind string) (map[string][]byte, error)
}

// Agents is the running core as enrollment changes it (core.Core).
type Agents interface {
	// Admit lets an agent in from now on.
	Admit(a policy.AgentConfig)
	// Forget drops an agent for good, failing its tasks in flight with why.
	Forget(id, why string)
}

// Authority signs a joined host's NATS identity and revokes it at the broker.
type Authority interface {
	// IssueUser returns a user JWT for userPub with id's rights.
	IssueUser(id broker.Identity, userPub string) (string, error)
	// Revoke revokes userPub at the broker, which closes its connections.
	Revoke(ctx context.Context, userPub string) error
}

// Params configure an Enroller.
type Params struct {
	Store     Records
	Authority Authority
	// Agents returns the running core, or nil when none runs (a standby).
	Agents func() Agents
	// Configured is agent id's entry in the orchestrator's config, or nil: such
	// an id cannot be enrolled, and revoking it revokes the entry's public_key.
	Configured func(id string) *policy.AgentConfig
	// NATSURLs, Prefix and CAPEM are what a joined host is told of the site.
	NATSURLs []string
	Prefix   string
	CAPEM    []byte
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Enroller enrolls, joins and revokes hosts. Its methods are safe for
// concurrent use; each change is made whole under one lock, so a code joins
// once.
type Enroller struct {
	p Params
	// fp is the CA's fingerprint, which each code is shown with.
	fp string
	mu sync.Mutex
}

// New makes an Enroller.
func New(p Params) *Enroller {
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	e := &Enroller{p: p}
	if block, _ := pem.Decode(p.CAPEM); block != nil {
		e.fp = api.CAFingerprint(block.Bytes)
	}
	return e
}

// record is an enrollment as stored: the API's view and what only the
// orchestrator holds.
type record struct {
	api.Enrollment
	// CodeHash is the hex SHA-256 of the join code while it may be used;
	// UsedHash once it was used or revoked, so that it is refused by name.
	CodeHash string `json:"code_hash,omitempty"`
	UsedHash string `json:"used_hash,omitempty"`
	// Token and OrchestratorToken are the joined agent's pair; cleared once
	// revoked.
	Token             string `json:"token,omitempty"`
	OrchestratorToken string `json:"orchestrator_token,omitempty"`
}

// hashCode is the stored form of a join code.
func hashCode(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// Enroll makes a one-time join code for req's agent id and type, on behalf of
// caller. The id must be free: not in the config and not enrolled before.
func (e *Enroller) Enroll(req api.EnrollRequest, caller string) (*api.EnrollCode, error) {
	ttl, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.configured(req.AgentID) != nil {
		return nil, fmt.Errorf("%w: agent %s is in the orchestrator's config", api.ErrEnrolled, req.AgentID)
	}
	if old, err := e.get(req.AgentID); err == nil {
		return nil, fmt.Errorf("%w: agent %s is enrolled already (%s); revoked ids are not given out again",
			api.ErrEnrolled, req.AgentID, stateAt(old, e.now()))
	} else if !errors.Is(err, task.ErrNotFound) {
		return nil, err
	}
	code := newCode()
	now := e.now()
	rec := &record{Enrollment: api.Enrollment{AgentID: req.AgentID, Type: req.Type, Labels: req.Labels,
		State: api.EnrollPending, CreatedBy: caller, CreatedAt: now, ExpiresAt: now.Add(ttl)}, CodeHash: hashCode(code)}
	if err := e.put(rec); err != nil {
		return nil, err
	}
	e.p.Log.Info("host enrolled", "agent_id", req.AgentID, "type", req.Type, "by", caller, "expires_at", rec.ExpiresAt)
	return &api.EnrollCode{Code: code, Enrollment: rec.Enrollment, CAFingerprint: e.fp}, nil
}

// List returns every enrollment, by agent id, as it stands now.
func (e *Enroller) List() ([]api.Enrollment, error) {
	recs, err := e.all()
	if err != nil {
		return nil, err
	}
	out := make([]api.Enrollment, 0, len(recs))
	for _, r := range recs {
		out = append(out, e.view(r))
	}
	return out, nil
}

// Get returns agent id's enrollment, or task.ErrNotFound.
func (e *Enroller) Get(id string) (*api.Enrollment, error) {
	rec, err := e.get(id)
	if err != nil {
		return nil, err
	}
	v := e.view(rec)
	return &v, nil
}

// CoreAgents are the agents a new core starts with: those of config not
// revoked, and the hosts that joined, with their tokens (Restore then renews a
// running core).
func (e *Enroller) CoreAgents(config []policy.AgentConfig) ([]policy.AgentConfig, error) {
	recs, err := e.all()
	if err != nil {
		return nil, fmt.Errorf("read the enrollments: %w", err)
	}
	revoked := map[string]bool{}
	var joined []policy.AgentConfig
	for _, r := range recs {
		switch r.State {
		case api.EnrollRevoked:
			revoked[r.AgentID] = true
		case api.EnrollJoined:
			joined = append(joined, agentConfig(r))
		}
	}
	out := slices.DeleteFunc(slices.Clone(config), func(a policy.AgentConfig) bool { return revoked[a.ID] })
	return append(out, joined...), nil
}

// configured is agent id's config entry, or nil.
func (e *Enroller) configured(id string) *policy.AgentConfig {
	if e.p.Configured == nil {
		return nil
	}
	return e.p.Configured(id)
}

// Restore brings the running core up to the store: joined agents admitted,
// revoked ones forgotten. A core made while a join or a revocation was under
// way may have missed it; the orchestrator calls this once it runs one.
func (e *Enroller) Restore() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	agents := e.p.Agents()
	if agents == nil {
		return nil
	}
	recs, err := e.all()
	if err != nil {
		return err
	}
	for _, r := range recs {
		switch r.State {
		case api.EnrollJoined:
			agents.Admit(agentConfig(r))
		case api.EnrollRevoked:
			agents.Forget(r.AgentID, revokedWhy(r))
		}
	}
	return nil
}

// agentConfig is the config entry of joined agent r.
func agentConfig(r *record) policy.AgentConfig {
	return policy.AgentConfig{ID: r.AgentID, Type: r.Type, Token: r.Token, OrchestratorToken: r.OrchestratorToken}
}

// view is r as the API shows it, its state as of now.
func (e *Enroller) view(r *record) api.Enrollment {
	v := r.Enrollment
	v.Labels = maps.Clone(r.Labels)
	v.State = stateAt(r, e.now())
	return v
}

func (e *Enroller) now() time.Time { return e.p.Now().UTC() }

// get reads agent id's record.
func (e *Enroller) get(id string) (*record, error) {
	data, err := e.p.Store.Record(Kind, id)
	if errors.Is(err, task.ErrNotFound) {
		return nil, notEnrolled(id)
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("enrollment %s: %w", id, err)
	}
	return &r, nil
}

// notEnrolled is the error of an agent id with no enrollment:
// task.ErrNotFound, to errors.Is, with a message about agents, not tasks.
type notEnrolled string

func (id notEnrolled) Error() string {
	return fmt.Sprintf("agent %s is not enrolled (nor, to revoke it, in the orchestrator's config)", string(id))
}

// Is makes notEnrolled a task.ErrNotFound.
func (notEnrolled) Is(target error) bool { return target == task.ErrNotFound }

// all reads every record, sorted by agent id.
func (e *Enroller) all() ([]*record, error) {
	m, err := e.p.Store.Records(Kind)
	if err != nil {
		return nil, err
	}
	out := make([]*record, 0, len(m))
	for id, data := range m {
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("enrollment %s: %w", id, err)
		}
		out = append(out, &r)
	}
	slices.SortFunc(out, func(a, b *record) int { return cmp.Compare(a.AgentID, b.AgentID) })
	return out, nil
}

// put stores r.
func (e *Enroller) put(r *record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return e.p.Store.PutRecord(Kind, r.AgentID, data)
}
