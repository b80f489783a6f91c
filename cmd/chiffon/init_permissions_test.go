package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestInitBrokerConfGivesTheStoreAndEachInboxOnlyToItsOwner reads the users of
// the broker configs init writes, as nats-server loads them: no identity but the
// orchestrators' store connection may publish under chiffon.store.> or
// $JS.API.>; no agent may read any inbox but its own, nor publish in any but its
// own part of the orchestrator's (control answers) and those of the clients that
// command it; and the orchestrator itself may answer into nobody's inbox but an
// agent's and the forwarding one of its group.
func TestInitBrokerConfGivesTheStoreAndEachInboxOnlyToItsOwner(t *testing.T) {
	root := t.TempDir()
	plain, ha := filepath.Join(root, "plain"), filepath.Join(root, "ha")
	if code, _, errOut := runCLI(t, "", "init", "--dir", plain, "--agents", "code,infra", "--client", "ci=code-1",
		"--nats", "nats://nas.lan:4222", "--broker-host", "nas.lan"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "init", "--ha", "--dir", ha, "--agents", "code,infra", "--client", "ci=code-1",
		"--nats", "nats://n1.lan:4222,nats://n2.lan:4222,nats://n3.lan:4222", "--data-root", "/srv/chiffon"); code != 0 {
		t.Fatalf("init --ha: exit %d: %s", code, errOut)
	}
	for _, conf := range []string{filepath.Join(plain, "broker.conf"), filepath.Join(ha, "broker-1.conf")} {
		t.Run(filepath.Base(filepath.Dir(conf)), func(t *testing.T) {
			opts, err := server.ProcessConfigFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			stores := 0
			for _, u := range opts.Nkeys {
				who := userComment(t, conf, u.Nkey)
				pub, sub := u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow
				if who == "store" {
					stores++
				} else {
					for _, forbidden := range []string{"chiffon.store.>", "$JS.API.>"} {
						if p := colliding(pub, forbidden); p != "" {
							t.Errorf("%s may publish %s, under %s", who, p, forbidden)
						}
					}
				}
				agentID, isAgent := strings.CutPrefix(who, "agent ")
				switch {
				case isAgent:
					for _, p := range sub {
						if strings.HasPrefix(p, "chiffon.inbox.") && p != "chiffon.inbox.agent."+agentID+".>" {
							t.Errorf("%s may read %s", who, p)
						}
					}
					own := []string{"chiffon.inbox.orch.agent." + agentID + ".>"}
					if agentID == "code-1" {
						own = append(own, "chiffon.inbox.client.ci.>")
					}
					for _, p := range pub {
						if server.SubjectsCollide(p, "chiffon.inbox.>") && !within(p, own) {
							t.Errorf("%s may publish %s, in another identity's inbox", who, p)
						}
					}
				case who == "orchestrator":
					for _, p := range pub {
						if server.SubjectsCollide(p, "chiffon.inbox.>") &&
							!within(p, []string{"chiffon.inbox.agent.*.>", "chiffon.inbox.orch.fwd.>"}) {
							t.Errorf("the orchestrator may publish %s", p)
						}
					}
				}
			}
			if stores != 1 {
				t.Errorf("%d store identities, want 1", stores)
			}
		})
	}
}

// colliding returns the first of patterns some subject under filter matches, or "".
func colliding(patterns []string, filter string) string {
	for _, p := range patterns {
		if server.SubjectsCollide(p, filter) {
			return p
		}
	}
	return ""
}

// within reports whether every subject p matches lies under one of filters.
func within(p string, filters []string) bool {
	for _, f := range filters {
		if server.SubjectMatchesFilter(p, f) {
			return true
		}
	}
	return false
}

// userComment returns the name broker.WriteServerFile writes in a comment above
// the user with public key nkey.
func userComment(t *testing.T, conf, nkey string) string {
	t.Helper()
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, nkey)
	if i < 0 {
		t.Fatalf("%s lacks user %s", conf, nkey)
	}
	before := text[:i]
	c := strings.LastIndex(before, "# ")
	if c < 0 {
		t.Fatalf("%s: no comment names user %s", conf, nkey)
	}
	line, _, _ := strings.Cut(before[c+2:], "\n")
	return strings.TrimSpace(line)
}
