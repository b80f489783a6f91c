package site

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
)

// TestEnsureMakesEachFileOfTheSpecPrivateAndKeepsIt: the secrets dir is 0700,
// every key and token 0600; a file is made only when the spec asks for it, and
// a second Ensure keeps every token and key.
func TestEnsureMakesEachFileOfTheSpecPrivateAndKeepsIt(t *testing.T) {
	agents := []Agent{{Type: "code", ID: "code-1"}}
	for _, tc := range []struct {
		name        string
		spec        Spec
		made, notMe []string
	}{
		{"one broker", Spec{Agents: agents, BrokerHosts: []string{"nas.lan"}},
			[]string{APIToken, AgentToken("code-1"), AgentOrchestratorToken("code-1"), OrchestratorNKey, StoreNKey, AgentNKey("code-1"),
				"ca-key.pem", ServerKey, CA, ServerCert},
			[]string{ViewerToken, APIKey, "broker-1-key.pem", "client-orchestrator-key.pem"}},
		{"up's", Spec{Agents: agents, BrokerHosts: []string{"0.0.0.0"}, APIHosts: []string{"host.lan"}, ViewerToken: true},
			[]string{ViewerToken, APIKey, APICert}, []string{"client-agent-code-1-key.pem"}},
		{"a cluster with mutual TLS", Spec{Agents: agents, Clients: []Client{{Name: "ci", Agents: []string{"code-1"}}},
			Nodes: []Node{{"broker-1", []string{"n1.lan"}}, {"broker-2", []string{"n2.lan"}}}, MutualTLS: true},
			[]string{"broker-1-key.pem", "broker-2.pem", "client-ci.nk", "client-orchestrator-key.pem", "client-orchestrator-store-key.pem",
				"client-agent-code-1-key.pem", "client-client-ci.pem"},
			[]string{ServerKey, APIKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "secrets")
			if _, err := Ensure(dir, tc.spec); err != nil {
				t.Fatal(err)
			}
			if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
				t.Fatalf("secrets dir: %v %v", info, err)
			}
			before := map[string]string{}
			for _, name := range tc.made {
				info, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				isCert := strings.HasSuffix(name, ".pem") && !strings.HasSuffix(name, "-key.pem")
				if perm := info.Mode().Perm(); !isCert && perm != 0o600 {
					t.Errorf("%s has mode %v, want 0600", name, perm)
				}
				b, _ := os.ReadFile(filepath.Join(dir, name))
				before[name] = string(b)
			}
			for _, name := range tc.notMe {
				if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s made (%v), though the spec does not ask for it", name, err)
				}
			}
			if _, err := Ensure(dir, tc.spec); err != nil {
				t.Fatal(err)
			}
			for name, was := range before {
				if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != was {
					t.Errorf("%s changed on a second Ensure", name)
				}
			}
		})
	}
}

// TestNATSConfigNamesTheIdentitysOwnFiles: each identity's nats section names
// its own NKey, the CA, and with mutual TLS its own client certificate, under
// the directory the files have on its host.
func TestNATSConfigNamesTheIdentitysOwnFiles(t *testing.T) {
	st := &Secrets{spec: Spec{MutualTLS: true, Prefix: "lab"}}
	plain := &Secrets{spec: Spec{}}
	for _, tc := range []struct {
		id         broker.Identity
		nkey, cert string
	}{
		{orchID, "orchestrator.nk", "client-orchestrator.pem"},
		{storeID, "orchestrator-store.nk", "client-orchestrator-store.pem"},
		{broker.Identity{Role: broker.RoleAgent, Name: "code-1"}, "agent-code-1.nk", "client-agent-code-1.pem"},
		{broker.Identity{Role: broker.RoleClient, Name: "ci"}, "client-ci.nk", "client-client-ci.pem"},
	} {
		c := st.NATSConfig(tc.id, []string{"nats://a:4222"}, "/etc/chiffon")
		if c.NKeyFile != "/etc/chiffon/"+tc.nkey || c.TLS.CAFile != "/etc/chiffon/ca.pem" || c.TLS.CertFile != "/etc/chiffon/"+tc.cert ||
			c.TLS.KeyFile != "/etc/chiffon/"+strings.TrimSuffix(tc.cert, ".pem")+"-key.pem" || c.Prefix != "lab" || len(c.URLs) != 1 {
			t.Errorf("%s %s: %+v", tc.id.Role, tc.id.Name, c)
		}
		if p := plain.NATSConfig(tc.id, nil, "/s"); p.TLS.CertFile != "" || p.TLS.KeyFile != "" {
			t.Errorf("%s without mutual TLS has a client certificate: %+v", tc.id.Role, p.TLS)
		}
	}
}

// TestUsersAreEachIdentityWithItsOwnKey: the broker has one user per identity,
// named for it, each with its own public key and the rights of the subject
// table, none with every subject.
func TestUsersAreEachIdentityWithItsOwnKey(t *testing.T) {
	spec := Spec{Agents: []Agent{{"code", "code-1"}, {"infra", "infra-1"}}, Clients: []Client{{"ci", []string{"code-1"}}},
		BrokerHosts: []string{"127.0.0.1"}}
	st, err := Ensure(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	keys := map[string]bool{}
	for _, u := range st.BrokerFile("/s", "0.0.0.0:4222").Users {
		names = append(names, u.Name)
		if !strings.HasPrefix(u.NKey, "U") || keys[u.NKey] {
			t.Errorf("%s: public key %q missing or shared", u.Name, u.NKey)
		}
		keys[u.NKey] = true
		if slices.Contains(u.Publish, ">") || slices.Contains(u.Subscribe, ">") || len(u.Subscribe) == 0 {
			t.Errorf("%s: publish %v, subscribe %v", u.Name, u.Publish, u.Subscribe)
		}
	}
	if want := []string{"orchestrator", "store", "agent code-1", "agent infra-1", "client ci"}; !slices.Equal(names, want) {
		t.Errorf("users %q, want %q", names, want)
	}
}
