package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/internal/testnats"
)

// TestOperatorFileLoadsAndIsCheckedWithoutMakingItsResolverDir: an operator
// block loads as nats-server reads it, and `chiffon config check` reads it on a
// host where the broker's resolver dir does not exist, without making it.
func TestOperatorFileLoadsAndIsCheckedWithoutMakingItsResolverDir(t *testing.T) {
	dir := t.TempDir()
	site, err := natsjwt.EnsureSite(filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	resolver := filepath.Join(dir, "data", "broker", "jwt")
	path := filepath.Join(dir, "broker.conf")
	if err := broker.WriteServerFile(path, broker.ServerFile{Listen: "127.0.0.1:-1", Operator: site.ServerOperator(resolver)}); err != nil {
		t.Fatal(err)
	}
	if !broker.LooksLikeServerFile(path) {
		t.Fatal("not taken for a server file")
	}
	desc, err := broker.CheckServerFile(path)
	if err != nil || !strings.Contains(desc, "operator mode") {
		t.Fatalf("check: %q %v", desc, err)
	}
	if _, err := os.Stat(resolver); err == nil {
		t.Fatal("the check made the resolver dir")
	}
	s := testnats.Start(t, broker.ServerConfig{ConfigFile: path})
	if !s.AuthRequired() {
		t.Fatal("an operator-mode server needs no authentication")
	}
	if _, err := os.Stat(filepath.Join(resolver, site.Authority.AccountPublicKey+".jwt")); err != nil {
		t.Fatalf("the account is not preloaded in the resolver dir: %v", err)
	}
}

func TestOperatorFileRefusesWhatTheServerWouldNot(t *testing.T) {
	site, err := natsjwt.EnsureSite(filepath.Join(t.TempDir(), "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	_, pub := testnats.NKey(t)
	op := func(change func(o *broker.OperatorFile)) *broker.OperatorFile {
		o := site.ServerOperator("/var/lib/chiffon/broker/jwt")
		change(o)
		return o
	}
	for name, f := range map[string]broker.ServerFile{
		"users and an operator": {Users: []broker.User{{NKey: pub}}, Operator: op(func(*broker.OperatorFile) {})},
		"no resolver dir":       {Operator: op(func(o *broker.OperatorFile) { o.ResolverDir = "" })},
		"no system account":     {Operator: op(func(o *broker.OperatorFile) { delete(o.Preload, o.SystemAccount) })},
		"system account a user": {Operator: op(func(o *broker.OperatorFile) { o.SystemAccount = pub })},
		"operator not a JWT":    {Operator: op(func(o *broker.OperatorFile) { o.OperatorJWT = "x" })},
	} {
		if err := broker.WriteServerFile(filepath.Join(t.TempDir(), "nats.conf"), f); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}
