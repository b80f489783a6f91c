package tests

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"
)

// newEnrollCluster is an operator-mode cluster (chiffon init --operator) with
// agents code-1 .. code-n, whose orchestrator has the enroll section init
// wrote and serves its API over HTTPS with a certificate of the site CA.
func newEnrollCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := newSiteCluster(t, n, true)
	cert, key, err := broker.EnsureNamedServerCert(c.secretsDir(), "api", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c.apiTLS = fmt.Sprintf(", tls: {cert_file: %s, key_file: %s}", cert, key)
	raw, err := os.ReadFile(filepath.Join(c.siteDir, "orchestrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var written struct {
		Enroll map[string]string `yaml:"enroll"`
	}
	if err := yaml.Unmarshal(raw, &written); err != nil || len(written.Enroll) != 4 {
		t.Fatalf("chiffon init --operator wrote no enroll section: %v %v", err, written.Enroll)
	}
	section, _ := json.Marshal(written.Enroll) // JSON is YAML's flow style
	c.orchExtra += "enroll: " + string(section) + "\n"
	c.writeOrchConfig()
	pool, err := broker.LoadCertPool(c.secret("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c.client = &client.Client{BaseURL: "https://" + c.httpAddr, Token: c.tokens["api.token"], HTTP: c.http}
	return c
}

// apiFlags are the client flags of c's operator, over HTTPS.
func (c *cluster) apiFlags() []string {
	return []string{"--server", c.client.BaseURL, "--api-token-file", c.secret("api.token"), "--api-ca-file", c.secret("ca.pem")}
}

// enroll runs chiffon enroll and returns its code.
func (c *cluster) enroll(id, ttl string) *api.EnrollCode {
	c.t.Helper()
	got := chiffonBinary(c.t, c.bin, append([]string{"enroll", "--type", "code", "--id", id, "--label", "site=vps",
		"--ttl", ttl, "--json"}, c.apiFlags()...)...)
	var code api.EnrollCode
	if got.code != 0 || json.Unmarshal([]byte(got.stdout), &code) != nil || code.Code == "" {
		c.t.Fatalf("chiffon enroll %s: exit %d: %s%s", id, got.code, got.stdout, got.stderr)
	}
	return &code
}

// join runs chiffon agent join into dir, with the flags of extra.
func (c *cluster) join(dir, fingerprint, code string, extra ...string) result {
	c.t.Helper()
	args := append([]string{"agent", "join", "--orchestrator", c.client.BaseURL, "--ca-fingerprint", fingerprint,
		"--dir", dir}, extra...)
	return chiffonBinary(c.t, c.bin, append(args, code)...)
}

// refusedJoin checks that a join was refused with want in its error, and
// that it wrote nothing.
func (c *cluster) refusedJoin(what string, got result, dir, want string) {
	c.t.Helper()
	if got.code == 0 || !strings.Contains(got.stderr, want) {
		c.t.Errorf("%s: exit %d, stderr %q; want a refusal saying %q", what, got.code, got.stderr, want)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 || err != nil && !os.IsNotExist(err) {
		c.t.Errorf("%s: the refused join wrote %v (%v)", what, entries, err)
	}
}

// enrollment is agent id's enrollment as the API shows it.
func (c *cluster) enrollment(ctx context.Context, id string) api.Enrollment {
	c.t.Helper()
	list, err := c.client.Enrollments(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range list {
		if e.AgentID == id {
			return e
		}
	}
	c.t.Fatalf("no enrollment of %s in %+v", id, list)
	return api.Enrollment{}
}

// TestAHostJoinsWithACodeRunsATaskAndIsRevoked: with the built binary on an
// operator-mode site, a wrong CA fingerprint, a code for another id and an
// expired code are each refused with a clear error and nothing written; the
// right join writes the host's files 0600 and its agent runs a task, before
// and after the orchestrator is killed and started again; the same code again
// is refused; revoking the agent closes its connection within 5 s,
// fails its task in flight, refuses its key afterwards and leaves the other
// agent running; the store keeps who enrolled and revoked it.
func TestAHostJoinsWithACodeRunsATaskAndIsRevoked(t *testing.T) {
	c := newEnrollCluster(t, 1)
	c.startBroker()
	c.startOrchestrator()
	c.startAgent("code-1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	code := c.enroll("joined-1", "1h")
	short := c.enroll("joined-2", "1s")
	caDER, _ := pem.Decode([]byte(c.readFile(c.secret("ca.pem"))))
	if want := api.CAFingerprint(caDER.Bytes); code.CAFingerprint != want {
		t.Fatalf("enroll shows CA fingerprint %s, the site CA's is %s", code.CAFingerprint, want)
	}
	other := sha256.Sum256([]byte("another CA"))
	c.refusedJoin("a wrong CA fingerprint", c.join(filepath.Join(c.dir, "j-fp"), fmt.Sprintf("%X", other), code.Code),
		filepath.Join(c.dir, "j-fp"), "not from the CA of that fingerprint")
	if e := c.enrollment(ctx, "joined-1"); e.State != api.EnrollPending {
		t.Fatalf("after a join stopped at the fingerprint the enrollment is %s: the code reached the orchestrator", e.State)
	}
	c.refusedJoin("a code for another id", c.join(filepath.Join(c.dir, "j-id"), code.CAFingerprint, code.Code, "--id", "joined-9"),
		filepath.Join(c.dir, "j-id"), "for another agent id")
	c.waitFor("joined-2's code expired", 30*time.Second, func() bool { return c.enrollment(ctx, "joined-2").State == api.EnrollExpired })
	c.refusedJoin("an expired code", c.join(filepath.Join(c.dir, "j-exp"), short.CAFingerprint, short.Code),
		filepath.Join(c.dir, "j-exp"), "expired")

	dir := filepath.Join(c.dir, "joined-1")
	if got := c.join(dir, code.CAFingerprint, code.Code, "--id", "joined-1"); got.code != 0 {
		t.Fatalf("join: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	c.checkJoinedFiles(dir, "joined-1")
	c.refusedJoin("the same code again", c.join(filepath.Join(c.dir, "j-again"), code.CAFingerprint, code.Code),
		filepath.Join(c.dir, "j-again"), "already used")

	c.runJoinedAgent(dir, "joined-1")
	c.countOn(ctx, "joined-1", 7)
	since := time.Now()
	restartOrchestrator(c) // SIGKILL: the joined agent is in the store, not the config
	c.waitAgentOnline("joined-1", since)
	c.countOn(ctx, "joined-1", 6)

	c.revokeWhileRunning(ctx, filepath.Join(dir, "secrets", "agent-joined-1.creds"), "joined-1")
	c.countOn(ctx, "code-1", 8)
	e := c.enrollment(ctx, "joined-1")
	if e.State != api.EnrollRevoked || e.CreatedBy == "" || e.RevokedBy == "" || e.RevokedAt == nil || e.JoinedAt == nil {
		t.Errorf("the store's record of joined-1: %+v", e)
	}
	c.assertNoTokenLogged()
}

// checkJoinedFiles checks what a join wrote: a 0700 secrets dir whose files
// are 0600, and a config naming them.
func (c *cluster) checkJoinedFiles(dir, id string) {
	c.t.Helper()
	secrets := filepath.Join(dir, "secrets")
	if fi, err := os.Stat(secrets); err != nil || fi.Mode().Perm() != 0o700 {
		c.t.Fatalf("%s: %v, want a 0700 dir", secrets, err)
	}
	for _, name := range []string{"agent-" + id + ".creds", "agent-" + id + ".token", "agent-" + id + ".orchestrator.token", "ca.pem"} {
		if fi, err := os.Stat(filepath.Join(secrets, name)); err != nil || fi.Mode().Perm() != 0o600 {
			c.t.Errorf("%s: %v, want a 0600 file", name, err)
		}
	}
	conf := c.readFile(filepath.Join(dir, "agent.yaml"))
	for _, want := range []string{"creds_file: " + filepath.Join(secrets, "agent-"+id+".creds"), "id: " + id, "site: vps"} {
		if !strings.Contains(conf, want) {
			c.t.Errorf("agent.yaml lacks %q:\n%s", want, conf)
		}
	}
}

// runJoinedAgent starts the agent of the config a join wrote in dir, with the
// cluster's work types in place of the example's, and waits until it is
// online.
func (c *cluster) runJoinedAgent(dir, id string) {
	c.t.Helper()
	path := filepath.Join(dir, "agent.yaml")
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(c.readFile(path)), &doc); err != nil {
		c.t.Fatal(err)
	}
	c.writeAgentConfig(id) // the cluster's work types, to take over
	var ours map[string]any
	if err := yaml.Unmarshal([]byte(c.readFile(filepath.Join(c.dir, id+".yaml"))), &ours); err != nil {
		c.t.Fatal(err)
	}
	for _, k := range []string{"work_types", "heartbeat_interval", "keepalive_interval", "drain_timeout"} {
		doc[k] = ours[k]
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	since := time.Now()
	p := c.spawn(id, nil, "agent", "--config", path)
	c.mu.Lock()
	c.agents[id] = p
	c.mu.Unlock()
	c.waitAgentOnline(id, since)
}

// countOn runs the count work type on agent id and checks its output.
func (c *cluster) countOn(ctx context.Context, id string, n int) {
	c.t.Helper()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": n}, Hints: &task.Hints{AgentID: id}})
	if err != nil {
		c.t.Fatal(err)
	}
	got := c.waitTask(ctx, tsk.ID)
	want := fmt.Sprintf("out %d %s\n", n, tsk.RequestID)
	if out := c.output(ctx, tsk.ID); got.State != task.StateSucceeded || out != want || got.AgentID != id {
		c.t.Fatalf("task on %s: %s on %s, output %q; want succeeded there with %q", id, got.State, got.AgentID, out, want)
	}
}

// revokeWhileRunning revokes agent id while a task of it runs, and checks
// what follows: its connections (of creds) closed within 5 s, its key
// refused, the task failed, the agent gone from the list.
func (c *cluster) revokeWhileRunning(ctx context.Context, creds, id string) {
	c.t.Helper()
	closed := make(chan time.Time, 1)
	watcher, err := broker.Connect(broker.ConnConfig{URLs: []string{c.natsURL()}, CredsFile: creds,
		TLS: broker.ClientTLS{CAFile: c.secret("ca.pem")},
		OnDisconnect: func(*nats.Conn, error) {
			select {
			case closed <- time.Now():
			default:
			}
		}})
	if err != nil {
		c.t.Fatalf("connect with %s's creds: %v", id, err)
	}
	defer watcher.Close()
	long, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 1, "sleep": "120"}, Hints: &task.Hints{AgentID: id}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.waitFor("the long task running", 30*time.Second, func() bool {
		tk, err := c.client.Get(ctx, long.ID)
		return err == nil && tk.State == task.StateRunning
	})
	asked := time.Now()
	if got := chiffonBinary(c.t, c.bin, append([]string{"agent", "revoke", id}, c.apiFlags()...)...); got.code != 0 {
		c.t.Fatalf("chiffon agent revoke: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	select {
	case at := <-closed:
		c.t.Logf("%s's connection closed %s after the revoke was asked", id, at.Sub(asked).Round(time.Millisecond))
	case <-time.After(5*time.Second - time.Since(asked)):
		c.t.Fatalf("%s's connection still open 5 s after the revoke was asked", id)
	}
	if nc, err := broker.Connect(broker.ConnConfig{URLs: []string{c.natsURL()}, CredsFile: creds,
		TLS: broker.ClientTLS{CAFile: c.secret("ca.pem")}}); err == nil {
		nc.Close()
		c.t.Fatalf("%s's revoked creds connected", id)
	}
	got := c.waitTask(ctx, long.ID)
	if got.State != task.StateError || got.Error == nil || !strings.Contains(got.Error.Message, "revoked") {
		c.t.Errorf("the task in flight on the revoked agent: %s %+v", got.State, got.Error)
	}
	if _, listed := c.agentInfo(id); listed {
		c.t.Errorf("the revoked agent %s is still listed", id)
	}
}

// publicKey is agent id's public_key entry in the orchestrator's config, as
// chiffon init --operator writes it: ", public_key: U..." in operator mode.
func (c *cluster) publicKey(id string) string {
	if !c.operator {
		return ""
	}
	kp, err := nkeys.ParseDecoratedNKey([]byte(c.readFile(c.secret("agent-" + id + ".creds"))))
	if err != nil {
		c.t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		c.t.Fatal(err)
	}
	return ", public_key: " + pub
}

// readFile reads path, failing the test if it cannot.
func (c *cluster) readFile(path string) string {
	c.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// TestAnAgentOfTheConfigIsRevokedByItsKey: `chiffon agent revoke` of an
// agent of the config (not enrolled) revokes the key its entry names: its
// connection closes within 5 s, its task in flight fails, its key is refused,
// the other agent runs on, and it stays out after the orchestrator is killed
// and started again.
func TestAnAgentOfTheConfigIsRevokedByItsKey(t *testing.T) {
	c := newEnrollCluster(t, 2)
	c.startBroker()
	c.startOrchestrator()
	c.startAgent("code-1")
	c.startAgent("code-2")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.revokeWhileRunning(ctx, c.secret("agent-code-2.creds"), "code-2")
	c.countOn(ctx, "code-1", 4)
	restartOrchestrator(c)
	c.countOn(ctx, "code-1", 5)
	if _, listed := c.agentInfo("code-2"); listed {
		t.Error("the revoked agent of the config is back after a restart")
	}
	if e := c.enrollment(ctx, "code-2"); e.State != api.EnrollRevoked || e.RevokedBy == "" {
		t.Errorf("the store's record of code-2: %+v", e)
	}
}

// TestTheJoinExchangeCarriesOnlyWhatTheHostMustHold: the join's request holds
// the host's public key and the code, never a seed; its answer holds the
// host's own identity (a user JWT for that key, with an agent's rights over its
// own subjects alone), a token pair made for it and the CA certificate, and no
// byte of any secret of the site; neither the code nor the new tokens are
// logged, and the API's record of the enrollment shows no token.
func TestTheJoinExchangeCarriesOnlyWhatTheHostMustHold(t *testing.T) {
	c := newEnrollCluster(t, 1)
	c.startBroker()
	c.startOrchestrator()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := c.client.Enroll(ctx, api.EnrollRequest{AgentID: "joined-3", Type: "code"})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	body, _ := json.Marshal(api.JoinRequest{Code: code.Code, PublicKey: pub})
	if strings.Contains(string(body), string(seed)) {
		t.Fatal("the join request holds the seed")
	}
	resp, err := c.http.Post(c.client.BaseURL+"/api/v1/join", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("join: %d %s", resp.StatusCode, raw)
	}
	for name, secret := range c.siteSecretParts() {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the join's answer holds %s", name)
		}
	}
	var g api.JoinGrant
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if g.CAPEM != c.readFile(c.secret("ca.pem")) || len(g.Token) != broker.TokenLen || len(g.OrchestratorToken) != broker.TokenLen {
		t.Errorf("grant: CA %t, tokens %d and %d characters", g.CAPEM == c.readFile(c.secret("ca.pem")), len(g.Token), len(g.OrchestratorToken))
	}
	uc, err := jwt.DecodeUserClaims(g.UserJWT)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Subject != pub || !slices.Contains(uc.Pub.Allow, "chiffon.registry.register.joined-3") ||
		slices.ContainsFunc(append(uc.Pub.Allow, uc.Sub.Allow...), func(s string) bool { return strings.Contains(s, "code-1") || s == ">" }) {
		t.Errorf("the user JWT is for %s with publish %v, subscribe %v", uc.Subject, uc.Pub.Allow, uc.Sub.Allow)
	}
	view, err := json.Marshal(c.enrollment(ctx, "joined-3"))
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"the code": code.Code, "the token": g.Token, "the orchestrator token": g.OrchestratorToken} {
		if strings.Contains(string(view), s) {
			t.Errorf("the API's enrollment record shows %s", what)
		}
		for file, lines := range c.logs() {
			for _, l := range lines {
				if strings.Contains(l, s) {
					t.Errorf("%s logs %s: %s", file, what, l)
				}
			}
		}
	}
	c.assertNoTokenLogged()
}

// siteSecretParts are the secrets of every file of the site's secrets dir
// but the CA certificate: whole tokens and seeds, and the seed and JWT of each
// .creds, by where they come from.
func (c *cluster) siteSecretParts() map[string]string {
	c.t.Helper()
	entries, err := os.ReadDir(c.secretsDir())
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "ca.pem" {
			continue
		}
		text := strings.TrimSpace(c.readFile(filepath.Join(c.secretsDir(), e.Name())))
		if !strings.HasSuffix(e.Name(), ".creds") {
			out[e.Name()] = text
			continue
		}
		for i, l := range strings.Split(text, "\n") {
			if l = strings.TrimSpace(l); len(l) > 40 && !strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "*") {
				out[fmt.Sprintf("%s line %d", e.Name(), i+1)] = l
			}
		}
	}
	return out
}
