package enroll

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nkeys"
)

// fakeAuthority signs "JWTs" naming the identity and key, and records
// revocations; fail makes its next call fail.
type fakeAuthority struct {
	mu      sync.Mutex
	revoked []string
	fail    error
}

func (f *fakeAuthority) IssueUser(id broker.Identity, userPub string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	return "jwt:" + string(id.Role) + ":" + id.Name + ":" + userPub, nil
}

func (f *fakeAuthority) Revoke(_ context.Context, userPub string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.revoked = append(f.revoked, userPub)
	return nil
}

// fakeAgents records what the core was told.
type fakeAgents struct {
	admitted  map[string]policy.AgentConfig
	forgotten map[string]string
}

func (f *fakeAgents) Admit(a policy.AgentConfig) { f.admitted[a.ID] = a }
func (f *fakeAgents) Forget(id, why string) {
	delete(f.admitted, id)
	f.forgotten[id] = why
}

type fixture struct {
	// config are the agents of the orchestrator's config.
	config map[string]*policy.AgentConfig
	e      *Enroller
	auth   *fakeAuthority
	core   *fakeAgents
	store  *memstore.Store
	now    time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{auth: &fakeAuthority{}, core: &fakeAgents{admitted: map[string]policy.AgentConfig{}, forgotten: map[string]string{}},
		store: memstore.New(0), now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC),
		config: map[string]*policy.AgentConfig{"nas": {ID: "nas", Type: "infra", PublicKey: "UNAS"}}}
	f.e = New(Params{Store: f.store, Authority: f.auth, Agents: func() Agents { return f.core },
		Configured: func(id string) *policy.AgentConfig { return f.config[id] }, NATSURLs: []string{"tls://nas.lan:4222"},
		CAPEM: []byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"), Now: func() time.Time { return f.now }})
	return f
}

func userKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func (f *fixture) enroll(t *testing.T, id string) string {
	t.Helper()
	c, err := f.e.Enroll(api.EnrollRequest{AgentID: id, Type: "infra", Labels: map[string]string{"site": "home"}}, "alice")
	if err != nil {
		t.Fatalf("enroll %s: %v", id, err)
	}
	return c.Code
}

func (f *fixture) state(t *testing.T, id string) api.EnrollState {
	t.Helper()
	en, err := f.e.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return en.State
}

// TestDecideHasARowForEveryStateAndEvent is the machine's table.
func TestDecideHasARowForEveryStateAndEvent(t *testing.T) {
	cases := []struct {
		state api.EnrollState
		ev    event
		want  api.EnrollState
		err   error
	}{
		{api.EnrollPending, joinEvent, api.EnrollJoined, nil},
		{api.EnrollExpired, joinEvent, api.EnrollExpired, api.ErrJoinCodeExpired},
		{api.EnrollJoined, joinEvent, api.EnrollJoined, api.ErrJoinCodeUsed},
		{api.EnrollRevoked, joinEvent, api.EnrollRevoked, api.ErrJoinCodeRevoked},
		{api.EnrollPending, revokeEvent, api.EnrollRevoked, nil},
		{api.EnrollExpired, revokeEvent, api.EnrollRevoked, nil},
		{api.EnrollJoined, revokeEvent, api.EnrollRevoked, nil},
		{api.EnrollRevoked, revokeEvent, api.EnrollRevoked, api.ErrRevoked},
	}
	for _, tc := range cases {
		got, err := decide(tc.state, tc.ev)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("decide(%s, %d) = %s, %v; want %s, %v", tc.state, tc.ev, got, err, tc.want, tc.err)
		}
	}
}

// TestACodeJoinsOnceAndOnlyForItsID: a code for another id, an unknown code
// and a bad key are refused and change nothing; the right join gets the
// agent's own identity and token pair, stores the record without the code and
// admits the agent; the same code again is refused by name.
func TestACodeJoinsOnceAndOnlyForItsID(t *testing.T) {
	f := newFixture(t)
	code := f.enroll(t, "vps1")
	pub := userKey(t)
	refusals := []struct {
		name string
		req  api.JoinRequest
		want error
	}{
		{"another id", api.JoinRequest{Code: code, AgentID: "vps2", PublicKey: pub}, api.ErrJoinOtherAgent},
		{"unknown code", api.JoinRequest{Code: "X" + code[1:], PublicKey: pub}, api.ErrJoinCodeUnknown},
	}
	for _, tc := range refusals {
		if _, err := f.e.Join(tc.req, "10.0.0.9"); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	var fe *api.FieldError
	if _, err := f.e.Join(api.JoinRequest{Code: code, PublicKey: "SUAM" + pub[4:]}, ""); !errors.As(err, &fe) || fe.Field != "public_key" {
		t.Errorf("a seed for a key: err = %v, want a public_key field error", err)
	}
	if f.state(t, "vps1") != api.EnrollPending || len(f.core.admitted) != 0 {
		t.Fatalf("refused joins changed something: state %s, admitted %v", f.state(t, "vps1"), f.core.admitted)
	}

	g, err := f.e.Join(api.JoinRequest{Code: code, AgentID: "vps1", PublicKey: pub}, "10.0.0.9")
	if err != nil {
		t.Fatal(err)
	}
	if g.AgentID != "vps1" || g.Type != "infra" || g.Labels["site"] != "home" || g.UserJWT != "jwt:agent:vps1:"+pub {
		t.Errorf("grant = %+v", g)
	}
	if len(g.Token) != broker.TokenLen || len(g.OrchestratorToken) != broker.TokenLen || g.Token == g.OrchestratorToken {
		t.Errorf("token pair %q / %q", g.Token, g.OrchestratorToken)
	}
	if a := f.core.admitted["vps1"]; a.Token != g.Token || a.OrchestratorToken != g.OrchestratorToken || a.Type != "infra" {
		t.Errorf("admitted %+v, want the grant's tokens", a)
	}
	raw, err := f.store.Record(Kind, "vps1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), code) || strings.Contains(string(raw), `"code_hash"`) {
		t.Errorf("the stored record keeps the code or its live hash: %s", raw)
	}
	en, _ := f.e.Get("vps1")
	if en.State != api.EnrollJoined || en.PublicKey != pub || en.JoinedFrom != "10.0.0.9" || en.JoinedAt == nil || en.CreatedBy != "alice" {
		t.Errorf("enrollment after join = %+v", en)
	}
	if view, _ := json.Marshal(en); strings.Contains(string(view), g.Token) || strings.Contains(string(view), g.OrchestratorToken) {
		t.Errorf("the API's view shows a token: %s", view)
	}
	if _, err := f.e.Join(api.JoinRequest{Code: code, PublicKey: userKey(t)}, ""); !errors.Is(err, api.ErrJoinCodeUsed) {
		t.Errorf("the same code again: err = %v, want %v", err, api.ErrJoinCodeUsed)
	}
	if a := f.core.admitted["vps1"]; a.Token != g.Token {
		t.Error("the refused second join changed the admitted agent")
	}
}

// TestAnExpiredCodeIsRefused: a code is good until its ttl and not after.
func TestAnExpiredCodeIsRefused(t *testing.T) {
	f := newFixture(t)
	c, err := f.e.Enroll(api.EnrollRequest{AgentID: "lap", Type: "desktop", TTL: "10m"}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(10 * time.Minute)
	if _, err := f.e.Join(api.JoinRequest{Code: c.Code, PublicKey: userKey(t)}, ""); !errors.Is(err, api.ErrJoinCodeExpired) {
		t.Fatalf("err = %v, want %v", err, api.ErrJoinCodeExpired)
	}
	if f.state(t, "lap") != api.EnrollExpired || len(f.core.admitted) != 0 {
		t.Errorf("state %s, admitted %v", f.state(t, "lap"), f.core.admitted)
	}
}

// TestEnrollRefusesWhatItCannotGive: ids in the config or enrolled before,
// bad ids, types, labels and lifetimes.
func TestEnrollRefusesWhatItCannotGive(t *testing.T) {
	f := newFixture(t)
	f.enroll(t, "vps1")
	cases := []struct {
		name  string
		req   api.EnrollRequest
		field string
		err   error
	}{
		{"in the config", api.EnrollRequest{AgentID: "nas", Type: "infra"}, "", api.ErrEnrolled},
		{"enrolled", api.EnrollRequest{AgentID: "vps1", Type: "infra"}, "", api.ErrEnrolled},
		{"bad id", api.EnrollRequest{AgentID: "a b", Type: "infra"}, "agent_id", nil},
		{"orchestrator", api.EnrollRequest{AgentID: "x", Type: "orchestrator"}, "type", nil},
		{"unknown type", api.EnrollRequest{AgentID: "x", Type: "gpu"}, "type", nil},
		{"bad label", api.EnrollRequest{AgentID: "x", Type: "infra", Labels: map[string]string{"": "v"}}, "labels.", nil},
		{"ttl too long", api.EnrollRequest{AgentID: "x", Type: "infra", TTL: "169h"}, "ttl", nil},
		{"ttl negative", api.EnrollRequest{AgentID: "x", Type: "infra", TTL: "-1m"}, "ttl", nil},
		{"ttl text", api.EnrollRequest{AgentID: "x", Type: "infra", TTL: "soon"}, "ttl", nil},
	}
	for _, tc := range cases {
		_, err := f.e.Enroll(tc.req, "alice")
		var fe *api.FieldError
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: err = %v, want a field error on %q", tc.name, err, tc.field)
		}
	}
	if list, _ := f.e.List(); len(list) != 1 {
		t.Errorf("refusals stored enrollments: %+v", list)
	}
}

// TestRevokeRevokesTheKeyForgetsTheAgentAndKeepsWhoDidIt: a joined host's
// key is revoked at the broker, the core forgets it, its tokens are dropped
// and the record says who revoked it; a revoked code cannot join; a failed
// broker revocation changes nothing.
func TestRevokeRevokesTheKeyForgetsTheAgentAndKeepsWhoDidIt(t *testing.T) {
	f := newFixture(t)
	pub := userKey(t)
	if _, err := f.e.Join(api.JoinRequest{Code: f.enroll(t, "vps1"), PublicKey: pub}, ""); err != nil {
		t.Fatal(err)
	}
	f.auth.fail = errors.New("no responders")
	if _, err := f.e.Revoke(context.Background(), "vps1", "bob"); err == nil {
		t.Fatal("revoke with the broker unreachable succeeded")
	}
	if f.state(t, "vps1") != api.EnrollJoined || len(f.core.forgotten) != 0 {
		t.Fatalf("a failed revocation changed something: %s, forgotten %v", f.state(t, "vps1"), f.core.forgotten)
	}
	f.auth.fail = nil
	en, err := f.e.Revoke(context.Background(), "vps1", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if en.State != api.EnrollRevoked || en.RevokedBy != "bob" || en.RevokedAt == nil || en.CreatedBy != "alice" {
		t.Errorf("revoked enrollment = %+v", en)
	}
	if len(f.auth.revoked) != 1 || f.auth.revoked[0] != pub {
		t.Errorf("revoked at the broker: %v, want [%s]", f.auth.revoked, pub)
	}
	if why := f.core.forgotten["vps1"]; !strings.Contains(why, "revoked by bob") {
		t.Errorf("forgotten with %q", why)
	}
	if raw, _ := f.store.Record(Kind, "vps1"); strings.Contains(string(raw), "token") {
		t.Errorf("the revoked record keeps tokens: %s", raw)
	}
	if agents, _ := f.e.CoreAgents(nil); len(agents) != 0 {
		t.Errorf("a new core's agents after revoke = %+v", agents)
	}
	if _, err := f.e.Revoke(context.Background(), "vps1", "bob"); !errors.Is(err, api.ErrRevoked) {
		t.Errorf("second revoke: err = %v, want %v", err, api.ErrRevoked)
	}
	code := f.enroll(t, "vps2")
	if _, err := f.e.Revoke(context.Background(), "vps2", "bob"); err != nil {
		t.Fatal(err)
	}
	if len(f.auth.revoked) != 1 {
		t.Errorf("revoking an unused code went to the broker: %v", f.auth.revoked)
	}
	if _, err := f.e.Join(api.JoinRequest{Code: code, PublicKey: userKey(t)}, ""); !errors.Is(err, api.ErrJoinCodeRevoked) {
		t.Errorf("join with a revoked code: err = %v, want %v", err, api.ErrJoinCodeRevoked)
	}
	if _, err := f.e.Revoke(context.Background(), "ghost", "bob"); !errors.Is(err, task.ErrNotFound) || !strings.Contains(err.Error(), "agent ghost is not enrolled") {
		t.Errorf("revoke of an id never enrolled: err = %v", err)
	}
}

// TestRestoreBringsANewCoreUpToTheStore: joined agents are admitted again
// and revoked ones forgotten.
func TestRestoreBringsANewCoreUpToTheStore(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a1", "a2"} {
		if _, err := f.e.Join(api.JoinRequest{Code: f.enroll(t, id), PublicKey: userKey(t)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.e.Revoke(context.Background(), "a2", "bob"); err != nil {
		t.Fatal(err)
	}
	f.core.admitted, f.core.forgotten = map[string]policy.AgentConfig{}, map[string]string{}
	if err := f.e.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.core.admitted["a1"]; !ok || len(f.core.admitted) != 1 {
		t.Errorf("admitted %v, want a1", f.core.admitted)
	}
	if _, ok := f.core.forgotten["a2"]; !ok {
		t.Errorf("forgotten %v, want a2", f.core.forgotten)
	}
}

// TestRevokeAnAgentOfTheConfigByItsKey: an agent of the config is revoked by
// the public_key of its entry and stays revoked (Revoked, for a new core); one
// without a key is refused, and nothing is revoked.
func TestRevokeAnAgentOfTheConfigByItsKey(t *testing.T) {
	f := newFixture(t)
	f.config["nas"].PublicKey = userKey(t)
	f.config["pi"] = &policy.AgentConfig{ID: "pi", Type: "infra"}
	if _, err := f.e.Revoke(context.Background(), "pi", "bob"); !errors.Is(err, api.ErrNoKey) {
		t.Errorf("revoke of a config agent without a key: err = %v, want %v", err, api.ErrNoKey)
	}
	en, err := f.e.Revoke(context.Background(), "nas", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if en.State != api.EnrollRevoked || en.RevokedBy != "bob" || en.CreatedBy != "(config)" {
		t.Errorf("the config agent's record: %+v", en)
	}
	if len(f.auth.revoked) != 1 || f.auth.revoked[0] != f.config["nas"].PublicKey {
		t.Errorf("revoked at the broker: %v, want nas's key", f.auth.revoked)
	}
	if _, ok := f.core.forgotten["nas"]; !ok {
		t.Error("the core did not forget nas")
	}
	config := []policy.AgentConfig{*f.config["nas"], *f.config["pi"]}
	if agents, _ := f.e.CoreAgents(config); len(agents) != 1 || agents[0].ID != "pi" {
		t.Errorf("a new core's agents = %+v, want pi alone: nas is revoked", agents)
	}
	if _, err := f.e.Revoke(context.Background(), "nas", "bob"); !errors.Is(err, api.ErrRevoked) {
		t.Errorf("second revoke: %v", err)
	}
}

// TestCoreAgentsAreTheConfigsNotRevokedAndTheJoined: a new core gets the
// agents of the config but those revoked, and the joined hosts with their
// tokens, but not a pending or revoked enrollment.
func TestCoreAgentsAreTheConfigsNotRevokedAndTheJoined(t *testing.T) {
	f := newFixture(t)
	g, err := f.e.Join(api.JoinRequest{Code: f.enroll(t, "j1"), PublicKey: userKey(t)}, "")
	if err != nil {
		t.Fatal(err)
	}
	f.enroll(t, "pending")
	if _, err := f.e.Join(api.JoinRequest{Code: f.enroll(t, "j2"), PublicKey: userKey(t)}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.Revoke(context.Background(), "j2", "bob"); err != nil {
		t.Fatal(err)
	}
	f.config["nas"].PublicKey = userKey(t)
	if _, err := f.e.Revoke(context.Background(), "nas", "bob"); err != nil {
		t.Fatal(err)
	}
	config := []policy.AgentConfig{{ID: "nas", Type: "infra"}, {ID: "pi", Type: "infra"}}
	agents, err := f.e.CoreAgents(config)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range agents {
		ids = append(ids, a.ID)
		if a.ID == "j1" && (a.Token != g.Token || a.OrchestratorToken != g.OrchestratorToken || a.Type != "infra") {
			t.Errorf("j1 starts with %+v, not its grant's tokens", a)
		}
	}
	if strings.Join(ids, ",") != "pi,j1" {
		t.Errorf("a new core's agents = %v, want [pi j1]", ids)
	}
	if len(config) != 2 || config[0].ID != "nas" {
		t.Errorf("CoreAgents changed the config it was given: %+v", config)
	}
}
