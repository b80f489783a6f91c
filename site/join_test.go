package site

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	natsjwt "github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// TestJoinedWritesTheGrantAndRefusesToReplaceIt: Write puts the grant's
// secrets 0600 in a 0700 dir and a config that names them; Check refuses a
// dir an earlier join wrote (before any code is used), unless Force.
func TestJoinedWritesTheGrantAndRefusesToReplaceIt(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := natsjwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	g := &api.JoinGrant{AgentID: "vps-1", Type: "infra", Labels: map[string]string{"room": "attic"},
		NATSURLs: []string{"wss://home.example:8443"}, UserJWT: jwt, Token: strings.Repeat("a", 32),
		OrchestratorToken: strings.Repeat("b", 32), CAPEM: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"}
	j := Joined{Dir: t.TempDir()}
	j.DataDir = filepath.Join(j.Dir, "data")
	if err := j.Check("vps-1"); err != nil {
		t.Fatal(err)
	}
	path, err := j.Write(g, seed)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(j.Dir, "secrets")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("secrets dir: %v %v", fi.Mode(), err)
	}
	for _, p := range j.files("vps-1")[1:] {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", p, err)
		}
	}
	creds, _ := os.ReadFile(filepath.Join(j.Dir, "secrets", "agent-vps-1.creds"))
	if !strings.Contains(string(creds), jwt) || !strings.Contains(string(creds), string(seed)) {
		t.Errorf("the .creds file lacks the JWT or the seed")
	}
	conf, _ := os.ReadFile(path)
	for _, want := range []string{"id: vps-1", "wss://home.example:8443", "creds_file: " + filepath.Join(j.Dir, "secrets", "agent-vps-1.creds"),
		"room: attic", "data_dir: " + j.DataDir} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("agent.yaml lacks %q", want)
		}
	}
	if strings.Contains(string(conf), g.Token) || strings.Contains(string(conf), string(seed)) {
		t.Error("agent.yaml holds a secret")
	}
	for _, id := range []string{"vps-1", ""} {
		if err := j.Check(id); err == nil {
			t.Errorf("Check(%q) of a dir a join wrote passed", id)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := j.Check("vps-1"); err == nil {
		t.Error("Check passed with the earlier join's secrets still there")
	}
	j.Force = true
	if err := j.Check("vps-1"); err != nil {
		t.Errorf("Check with Force: %v", err)
	}
	if _, err := j.Write(g, seed); err != nil {
		t.Errorf("Write with Force: %v", err)
	}
}
