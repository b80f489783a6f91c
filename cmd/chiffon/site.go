package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/broker"
)

// A site is every identity of one Chiffon: the orchestrator, its agents and the
// clients that script against agents. `chiffon init` writes one for several hosts
// and `chiffon up` keeps one in its data dir; both make the same files in one
// secrets directory (0700), each file 0600 unless it is a certificate:
//
//	api.token                              the HTTP API's bearer token
//	agent-<id>.token                       what the agent sends; the orchestrator checks it
//	agent-<id>.orchestrator.token          what the orchestrator sends to that agent alone
//	orchestrator.nk, agent-<id>.nk,        NATS identities (NKey seeds)
//	client-<name>.nk
//	orchestrator-store.nk                  the orchestrator's JetStream store
//	                                       connection (store.kind jetstream, as
//	                                       --ha writes), the only identity that may
//	                                       write the store
//	ca.pem, ca-key.pem                     the site CA
//	server.pem, server-key.pem             the broker's certificate
//	broker-<n>.pem, broker-<n>-key.pem     instead, with --ha, each cluster node's
//	api.pem, api-key.pem                   the HTTP API's certificate, when it is served
//	                                       beyond loopback
//	client-<identity>.pem, -key.pem        client certificates, with mutual TLS only

// siteSpec says what a site holds.
type siteSpec struct {
	agents  []siteAgent
	clients []siteClient
	// brokerHosts are the names and addresses in the broker's certificate.
	brokerHosts []string
	// nodes, when set, are the nodes of a broker cluster, each with its own
	// certificate, instead of one broker.
	nodes []siteNode
	// orchestrators are the names of a group's orchestrators ("orchestrator-1",
	// ...), or none for a single orchestrator.
	orchestrators []string
	// apiHosts, when set, are the names in a certificate for the orchestrator's
	// HTTP API, which then serves HTTPS.
	apiHosts []string
	// mutualTLS gives every identity a client certificate the broker requires.
	mutualTLS bool
	// prefix is the subject prefix; "" means broker.DefaultPrefix.
	prefix string
}

// siteNode is one node of a broker cluster: its name (its certificate's and
// config's, broker-<n>) and the names and addresses in its certificate.
type siteNode struct {
	name  string
	hosts []string
}

// siteAgent is one agent instance of a site.
type siteAgent struct{ typ, id string }

// siteClient is a client identity and the agents it may command.
type siteClient struct {
	name   string
	agents []string
}

// Names of a site's secret files.
const (
	siteAPIToken = "api.token"
	// siteViewerToken is a viewer's API token, which chiffon up makes.
	siteViewerToken = "viewer.token"
	siteOrchNKey    = "orchestrator.nk"
	siteStoreNKey   = "orchestrator-store.nk"
	siteCA          = "ca.pem"
	siteServerPEM   = "server.pem"
	siteServerKey   = "server-key.pem"
	siteAPIPEM      = "api.pem"
	siteAPIKey      = "api-key.pem"
)

func agentTokenName(id string) string     { return "agent-" + id + ".token" }
func agentOrchTokenName(id string) string { return "agent-" + id + ".orchestrator.token" }
func agentNKeyName(id string) string      { return "agent-" + id + ".nk" }
func clientNKeyName(name string) string   { return "client-" + name + ".nk" }

// certName is the client certificate name of an identity, for mutual TLS.
func certName(id broker.Identity) string {
	switch id.Role {
	case broker.RoleOrchestrator:
		return "orchestrator"
	case broker.RoleStore:
		return "orchestrator-store"
	}
	return string(id.Role) + "-" + id.Name
}

// storeID is the identity of a group's JetStream store connection.
var storeID = broker.Identity{Role: broker.RoleStore}

// site is a site's secrets as made in dir, with its identities' public keys.
type site struct {
	spec       siteSpec
	dir        string
	identities []broker.Identity
	nkeys      map[string]string // identity file name -> public key
}

// ensureSite makes (or keeps) every secret file of spec in dir and returns the
// site. Existing tokens, keys and the CA are kept; the broker's certificate is
// made again only when its names change.
func ensureSite(dir string, spec siteSpec) (*site, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	s := &site{spec: spec, dir: dir, nkeys: map[string]string{}}
	tokens := []string{siteAPIToken}
	s.identities = append(s.identities, broker.Identity{Role: broker.RoleOrchestrator}, storeID)
	for _, a := range spec.agents {
		tokens = append(tokens, agentTokenName(a.id), agentOrchTokenName(a.id))
		s.identities = append(s.identities, broker.Identity{Role: broker.RoleAgent, Name: a.id})
	}
	for _, c := range spec.clients {
		s.identities = append(s.identities, broker.Identity{Role: broker.RoleClient, Name: c.name, Agents: c.agents})
	}
	for _, name := range tokens {
		if _, err := loadOrCreateToken(filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	for _, id := range s.identities {
		name := nkeyName(id)
		pub, err := broker.EnsureNKeySeed(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		s.nkeys[name] = pub
	}
	if _, _, err := broker.EnsureCA(dir); err != nil {
		return nil, err
	}
	for _, n := range spec.nodes {
		if _, _, err := broker.EnsureNodeCert(dir, n.name, n.hosts); err != nil {
			return nil, err
		}
	}
	if spec.nodes == nil {
		if _, _, err := broker.EnsureServerCert(dir, spec.brokerHosts); err != nil {
			return nil, err
		}
	}
	if spec.apiHosts != nil {
		if _, _, err := broker.EnsureNamedServerCert(dir, "api", spec.apiHosts); err != nil {
			return nil, err
		}
	}
	if spec.mutualTLS {
		for _, id := range s.identities {
			if _, _, err := broker.EnsureClientCert(dir, certName(id)); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// nkeyName is the seed file name of an identity.
func nkeyName(id broker.Identity) string {
	switch id.Role {
	case broker.RoleAgent:
		return agentNKeyName(id.Name)
	case broker.RoleClient:
		return clientNKeyName(id.Name)
	case broker.RoleStore:
		return siteStoreNKey
	}
	return siteOrchNKey
}

// users are the broker's users: each identity's public key with the rights the
// subject table gives it.
func (s *site) users() []broker.User {
	subj := broker.Subjects{Prefix: s.spec.prefix}
	out := make([]broker.User, 0, len(s.identities))
	for _, id := range s.identities {
		p := subj.Permissions(id, s.identities)
		name := string(id.Role)
		if id.Name != "" {
			name += " " + id.Name
		}
		out = append(out, broker.User{Name: name, NKey: s.nkeys[nkeyName(id)], Publish: p.Publish, Subscribe: p.Subscribe})
	}
	return out
}

// brokerFile is the broker's config, naming its certificate files under
// hostDir, where they are on the broker's host.
func (s *site) brokerFile(hostDir, listen string) broker.ServerFile {
	return broker.ServerFile{
		Listen: listen,
		Users:  s.users(),
		TLS: &broker.ServerTLS{CertFile: filepath.Join(hostDir, siteServerPEM), KeyFile: filepath.Join(hostDir, siteServerKey),
			CAFile: filepath.Join(hostDir, siteCA), Verify: s.spec.mutualTLS},
	}
}

// natsConfig is the nats section of id's config: urls, its NKey and TLS, with
// file paths under hostDir, where they are on id's host.
func (s *site) natsConfig(id broker.Identity, urls []string, hostDir string) broker.NATSConfig {
	c := broker.NATSConfig{URLs: urls, Prefix: s.spec.prefix, NKeyFile: filepath.Join(hostDir, nkeyName(id)),
		TLS: broker.ClientTLS{CAFile: filepath.Join(hostDir, siteCA)}}
	if s.spec.mutualTLS {
		c.TLS.CertFile = filepath.Join(hostDir, "client-"+certName(id)+".pem")
		c.TLS.KeyFile = filepath.Join(hostDir, "client-"+certName(id)+"-key.pem")
	}
	return c
}

// hostFiles lists the secret files each host needs, by host: the broker, the
// orchestrator, each agent id and each client name.
func (s *site) hostFiles() [][2]string {
	clientCert := func(id broker.Identity) string {
		if !s.spec.mutualTLS {
			return ""
		}
		return fmt.Sprintf(", client-%[1]s.pem, client-%[1]s-key.pem", certName(id))
	}
	rows := [][2]string{{"broker", siteServerPEM + ", " + siteServerKey + ", " + siteCA}}
	if s.spec.nodes != nil {
		rows = nil
		for _, n := range s.spec.nodes {
			rows = append(rows, [2]string{n.name, n.name + ".pem, " + n.name + "-key.pem, " + siteCA})
		}
	}
	orch := siteOrchNKey + ", " + siteAPIToken + ", " + siteCA + clientCert(broker.Identity{Role: broker.RoleOrchestrator})
	orch += ", " + siteStoreNKey + clientCert(storeID)
	if s.spec.apiHosts != nil {
		orch += ", " + siteAPIPEM + ", " + siteAPIKey
	}
	for _, a := range s.spec.agents {
		orch += ", " + agentTokenName(a.id) + ", " + agentOrchTokenName(a.id)
	}
	if s.spec.orchestrators == nil {
		rows = append(rows, [2]string{"orchestrator", orch})
	}
	for _, name := range s.spec.orchestrators {
		rows = append(rows, [2]string{name, orch})
	}
	for _, a := range s.spec.agents {
		id := broker.Identity{Role: broker.RoleAgent, Name: a.id}
		rows = append(rows, [2]string{"agent " + a.id, agentNKeyName(a.id) + ", " + agentTokenName(a.id) + ", " +
			agentOrchTokenName(a.id) + ", " + siteCA + clientCert(id)})
	}
	for _, c := range s.spec.clients {
		id := broker.Identity{Role: broker.RoleClient, Name: c.name}
		files := clientNKeyName(c.name) + ", " + siteCA + clientCert(id)
		for _, a := range c.agents {
			files += ", " + agentTokenName(a) + ", " + agentOrchTokenName(a)
		}
		rows = append(rows, [2]string{"client " + c.name, files})
	}
	return rows
}

// loadOrCreateToken reads the token in path, or writes a new one there (0600).
func loadOrCreateToken(path string) (string, error) {
	tok, err := broker.ReadTokenFile(path)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	tok = broker.NewToken()
	return tok, broker.WriteTokenFile(path, tok)
}
