package natsjwt_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// TestUserIssuedAfterTheStartGetsExactlyItsAllowLists: the server learns nothing
// of a user when it starts, yet a user issued later connects, with the subject
// table's rights and no others; the store's identity uses the account's
// JetStream.
func TestUserIssuedAfterTheStartGetsExactlyItsAllowLists(t *testing.T) {
	ts := newSite(t)
	srv, _ := ts.startOne(t)
	urls := []string{srv.ClientURL()}
	orchCreds, _ := ts.creds(t, orch)
	agentCreds, _ := ts.creds(t, agent("a-1"))
	storeCreds, _ := ts.creds(t, store)

	a := ts.connect(t, urls, agentCreds)
	work, err := a.SubscribeSync(subj.AgentWork("a-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(a.Conn, subj.AgentWork("a-1"), deadline); err != nil {
		t.Fatal(err)
	}
	o := ts.connect(t, urls, orchCreds)
	if err := o.Publish(subj.AgentWork("a-1"), []byte("job")); err != nil {
		t.Fatal(err)
	}
	if m, err := work.NextMsg(deadline); err != nil || string(m.Data) != "job" {
		t.Fatalf("work for the agent: %v", err)
	}

	if _, err := a.SubscribeSync(subj.AgentWork("a-2")); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, a, subj.AgentWork("a-2"))
	if err := a.Publish(subj.AgentWork("a-1"), nil); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, a, subj.AgentWork("a-1"))
	if err := a.Publish(subj.Register("a-2"), nil); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, a, subj.Register("a-2"))

	s, err := broker.Connect(broker.ConnConfig{URLs: urls, CredsFile: storeCreds, TLS: ts.tls, InboxPrefix: subj.InboxOf(store)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	js, err := jetstream.New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TASKS", Subjects: []string{subj.Store() + ".>"}}); err != nil {
		t.Fatalf("the store's stream: %v", err)
	}
	if _, err := js.Publish(ctx, subj.Store()+".t-1", []byte("task")); err != nil {
		t.Fatalf("the store's write: %v", err)
	}
}

// TestRevokeClosesTheUsersConnectionsAndRefusesItAfterwards: a revocation pushed
// while the server runs cuts the user off at once and keeps it out, and leaves
// the other users alone.
func TestRevokeClosesTheUsersConnectionsAndRefusesItAfterwards(t *testing.T) {
	ts := newSite(t)
	srv, _ := ts.startOne(t)
	urls := []string{srv.ClientURL()}
	lostCreds, lost := ts.creds(t, agent("lost"))
	keptCreds, _ := ts.creds(t, agent("kept"))
	l := ts.connect(t, urls, lostCreds)
	k := ts.connect(t, urls, keptCreds)

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := ts.auth.Revoke(ctx, ts.system(t, urls), lost); err != nil {
		t.Fatal(err)
	}
	waitDisconnected(t, l, 5*time.Second)
	stillConnected(t, k)
	ts.refused(t, urls, lostCreds)
}

// TestRevocationSurvivesARestart: the server keeps the pushed account in its
// resolver dir, newer than the one its config file preloads.
func TestRevocationSurvivesARestart(t *testing.T) {
	ts := newSite(t)
	srv, cfg := ts.startOne(t)
	urls := []string{srv.ClientURL()}
	lostCreds, lost := ts.creds(t, agent("lost"))
	keptCreds, _ := ts.creds(t, agent("kept"))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sys := ts.system(t, urls)
	if err := ts.auth.Revoke(ctx, sys, lost); err != nil {
		t.Fatal(err)
	}
	sys.Close()

	srv = testnats.Restart(t, srv, cfg)
	ts.refused(t, urls, lostCreds)
	stillConnected(t, ts.connect(t, urls, keptCreds))
}

// TestTwoRevocationsInARowKeepBoth: the second push carries the first one's
// revocation too, though both may come within one second.
func TestTwoRevocationsInARowKeepBoth(t *testing.T) {
	ts := newSite(t)
	srv, _ := ts.startOne(t)
	urls := []string{srv.ClientURL()}
	firstCreds, first := ts.creds(t, agent("first"))
	secondCreds, second := ts.creds(t, agent("second"))
	keptCreds, _ := ts.creds(t, agent("kept"))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sys := ts.system(t, urls)
	preloaded, _ := jwt.DecodeAccountClaims(ts.site.AccountJWT)
	ids := map[string]bool{preloaded.ID: true}
	for _, pub := range []string{first, second} {
		if err := ts.auth.Revoke(ctx, sys, pub); err != nil {
			t.Fatal(err)
		}
		// A server takes a JWT with the jti of the one it holds for the same
		// and keeps its own: each push needs a jti of its own.
		m, err := sys.Request("$SYS.REQ.ACCOUNT."+ts.site.Authority.AccountPublicKey+".CLAIMS.LOOKUP", nil, deadline)
		if err != nil {
			t.Fatal(err)
		}
		c, err := jwt.DecodeAccountClaims(string(m.Data))
		if err != nil || ids[c.ID] {
			t.Fatalf("the account after revoking %s has the jti of an earlier one (%v)", pub, err)
		}
		ids[c.ID] = true
	}
	ts.refused(t, urls, firstCreds)
	ts.refused(t, urls, secondCreds)
	stillConnected(t, ts.connect(t, urls, keptCreds))
}

// TestClusterPropagatesARevocation: a revocation pushed to one node cuts off a
// user connected to another.
func TestClusterPropagatesARevocation(t *testing.T) {
	ts := newSite(t)
	ports := freePorts(t, 6)
	var nodes []*broker.Server
	for i := range 3 {
		name := "node-" + string(rune('1'+i))
		f := ts.serverFile(t, name, hostPort(ports[i]))
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, "nats-route://"+hostPort(ports[3+j]))
			}
		}
		f.Cluster = &broker.ClusterFile{Name: "c", Listen: hostPort(ports[3+i]), Routes: routes, TLS: *f.TLS}
		f.Cluster.TLS.Verify = true
		srv, _ := ts.start(t, name, f)
		nodes = append(nodes, srv)
	}
	one := []string{nodes[0].ClientURL()}
	three := []string{nodes[2].ClientURL()}
	lostCreds, lost := ts.creds(t, agent("lost"))
	keptCreds, _ := ts.creds(t, agent("kept"))
	orchCreds, _ := ts.creds(t, orch)
	l := ts.connect(t, three, lostCreds)
	k := ts.connect(t, three, keptCreds)
	waitRoutes(t, ts.connect(t, one, orchCreds), k)

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := ts.auth.Revoke(ctx, ts.system(t, one), lost); err != nil {
		t.Fatal(err)
	}
	waitDisconnected(t, l, 5*time.Second)
	stillConnected(t, k)
	ts.refused(t, three, lostCreds)
}

// waitRoutes waits until a message of the orchestrator on one node reaches the
// agent a-kept on another: the nodes are routed.
func waitRoutes(t *testing.T, o, kept *client) {
	t.Helper()
	sub, err := kept.SubscribeSync(subj.AgentWork("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.Flush(); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if err := o.Publish(subj.AgentWork("kept"), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(100 * time.Millisecond); err == nil {
			return
		}
	}
	t.Fatal("the nodes did not route a message")
}

// TestEnsureSiteKeepsItsKeysAndJWTs: a second run keeps every seed, the system
// user's key and the JWTs the servers preload, with private modes.
func TestEnsureSiteKeepsItsKeysAndJWTs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	first, err := natsjwt.EnsureSite(dir)
	if err != nil {
		t.Fatal(err)
	}
	read := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{natsjwt.OperatorSeed, natsjwt.OperatorSignerSeed, natsjwt.SystemAccountSeed,
			natsjwt.AccountSeed, natsjwt.AccountSignerSeed, natsjwt.OperatorJWTFile, natsjwt.SystemAccountJWTFile, natsjwt.AccountJWTFile} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			out[name] = string(b)
			checkMode(t, filepath.Join(dir, name), 0o600)
		}
		return out
	}
	// JWTs that still fit but that this build would not sign alike (a tag
	// added), so that one signed anew would differ even within a second.
	retag(t, dir, natsjwt.AccountJWTFile, natsjwt.OperatorSignerSeed)
	retag(t, dir, natsjwt.SystemAccountJWTFile, natsjwt.OperatorSignerSeed)
	retag(t, dir, natsjwt.OperatorJWTFile, natsjwt.OperatorSeed)
	before := read()
	checkMode(t, dir, 0o700|os.ModeDir)
	checkMode(t, first.Authority.SystemCredsFile, 0o600)
	sysKey := credsPublic(t, first.Authority.SystemCredsFile)
	second, err := natsjwt.EnsureSite(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range read() {
		if b != before[name] {
			t.Errorf("%s changed", name)
		}
	}
	if second.Authority != first.Authority || second.AccountJWT != before[natsjwt.AccountJWTFile] ||
		second.OperatorJWT != before[natsjwt.OperatorJWTFile] || credsPublic(t, second.Authority.SystemCredsFile) != sysKey {
		t.Fatal("the second run changed the authority, a JWT or the system user's key")
	}
	acc, err := jwt.DecodeAccountClaims(second.AccountJWT)
	if err != nil || acc.Name != natsjwt.AccountName || !acc.Limits.IsJSEnabled() || acc.Subject != first.Authority.AccountPublicKey {
		t.Fatalf("account %+v: %v", acc, err)
	}
}

// retag signs the JWT in file again with a tag added, with the seed in signer.
func retag(t *testing.T, dir, file, signer string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(dir, signer))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		t.Fatal(err)
	}
	var token string
	if c, err := jwt.DecodeOperatorClaims(string(b)); err == nil {
		c.Tags.Add("retagged")
		token, err = c.Encode(kp)
	} else if c, err := jwt.DecodeAccountClaims(string(b)); err == nil {
		c.Tags.Add("retagged")
		token, err = c.Encode(kp)
	}
	if token == "" || os.WriteFile(filepath.Join(dir, file), []byte(token), 0o600) != nil {
		t.Fatalf("retag %s", file)
	}
}

func credsPublic(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	return c.Subject
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != want {
		t.Errorf("%s: mode %v, want %v", path, st.Mode(), want)
	}
}

// TestIssuedUserIsSignedByTheAccountsSigningKey checks the claims a server does
// not show: the signer, the name, no expiry, and deny-all for an empty list.
func TestIssuedUserIsSignedByTheAccountsSigningKey(t *testing.T) {
	ts := newSite(t)
	_, pub := ts.creds(t, agent("a-1"))
	token, err := ts.auth.IssueUser(subj, store, nil, pub)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := jwt.DecodeAccountClaims(ts.site.AccountJWT)
	if c.IssuerAccount != ts.site.Authority.AccountPublicKey || c.Issuer == c.IssuerAccount || !acc.SigningKeys.Contains(c.Issuer) {
		t.Fatalf("issuer %s for account %s", c.Issuer, c.IssuerAccount)
	}
	if c.Name != "store" || c.Expires != 0 || c.Subject != pub {
		t.Fatalf("name %q, expires %d, subject %s", c.Name, c.Expires, c.Subject)
	}
	if _, err := ts.auth.IssueUser(subj, store, nil, ts.site.Authority.AccountPublicKey); err == nil {
		t.Fatal("a JWT for an account key")
	}
}

// TestErrorsHoldNoSeed: a broken key file is named, never quoted.
func TestErrorsHoldNoSeed(t *testing.T) {
	ts := newSite(t)
	f := ts.site.Authority
	seed, _ := os.ReadFile(f.AccountSigningKeyFile)
	opSeed, _ := os.ReadFile(f.OperatorSigningKeyFile)
	cut := filepath.Join(t.TempDir(), "cut.nk")
	os.WriteFile(cut, seed[:30], 0o600)
	for name, files := range map[string]natsjwt.AuthorityFiles{
		"cut seed":            {AccountSigningKeyFile: cut, OperatorSigningKeyFile: f.OperatorSigningKeyFile, AccountPublicKey: f.AccountPublicKey, SystemCredsFile: f.SystemCredsFile},
		"operator as account": {AccountSigningKeyFile: f.OperatorSigningKeyFile, OperatorSigningKeyFile: f.OperatorSigningKeyFile, AccountPublicKey: f.AccountPublicKey, SystemCredsFile: f.SystemCredsFile},
		"seed as creds":       {AccountSigningKeyFile: f.AccountSigningKeyFile, OperatorSigningKeyFile: f.OperatorSigningKeyFile, AccountPublicKey: f.AccountPublicKey, SystemCredsFile: f.AccountSigningKeyFile},
		"no account key":      {AccountSigningKeyFile: f.AccountSigningKeyFile, OperatorSigningKeyFile: f.OperatorSigningKeyFile, SystemCredsFile: f.SystemCredsFile},
	} {
		_, err := natsjwt.LoadAuthority(files)
		if err == nil {
			t.Errorf("%s: loaded", name)
			continue
		}
		t.Log(err)
		if strings.Contains(err.Error(), string(seed[2:20])) || strings.Contains(err.Error(), string(opSeed[2:20])) {
			t.Errorf("%s: %v holds the seed", name, err)
		}
	}
}

// TestARevocationKeepsThoseThisAuthorityPushedBefore: a server that has not seen
// the last push (here one that was never told: another server of the same
// site) answers the lookup with an older account, yet the next push carries the
// earlier revocation too.
func TestARevocationKeepsThoseThisAuthorityPushedBefore(t *testing.T) {
	ts := newSite(t)
	a, _ := ts.start(t, "a", ts.serverFile(t, "a", "127.0.0.1:-1"))
	b, _ := ts.start(t, "b", ts.serverFile(t, "b", "127.0.0.1:-1"))
	firstCreds, first := ts.creds(t, agent("first"))
	_, second := ts.creds(t, agent("second"))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := ts.auth.Revoke(ctx, ts.system(t, []string{a.ClientURL()}), first); err != nil {
		t.Fatal(err)
	}
	onB := []string{b.ClientURL()}
	stillConnected(t, ts.connect(t, onB, firstCreds))
	if err := ts.auth.Revoke(ctx, ts.system(t, onB), second); err != nil {
		t.Fatal(err)
	}
	ts.refused(t, onB, firstCreds)
}
