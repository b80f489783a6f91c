package site

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
)

// Secrets are a site's secret files as made in a directory, with its
// identities' public keys.
type Secrets struct {
	// Imported says what Layout.Write carried over from a first release's
	// tokens/, a line each.
	Imported []string

	spec       Spec
	dir        string
	identities []broker.Identity
	nkeys      map[string]string // identity file name -> public key
	operator   *natsjwt.Site     // in operator mode only
}

// Ensure makes (or keeps) every secret file of spec in dir (0700) and returns
// them. Existing tokens, keys and the CA are kept; a certificate is made again
// only when its names change.
func Ensure(dir string, spec Spec) (*Secrets, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Secrets{spec: spec, dir: dir, identities: identities(spec), nkeys: map[string]string{}}
	if err := s.ensureTokens(); err != nil {
		return nil, err
	}
	ensureIdentities := s.ensureNKeys
	if spec.Operator {
		ensureIdentities = s.ensureOperator
	}
	if err := ensureIdentities(); err != nil {
		return nil, err
	}
	if err := s.ensureCerts(); err != nil {
		return nil, err
	}
	return s, nil
}

// identities are every NATS identity of spec: the orchestrator, its store
// connection, the agents and the clients.
func identities(spec Spec) []broker.Identity {
	ids := []broker.Identity{orchID, storeID}
	for _, a := range spec.Agents {
		ids = append(ids, broker.Identity{Role: broker.RoleAgent, Name: a.ID})
	}
	for _, c := range spec.Clients {
		ids = append(ids, broker.Identity{Role: broker.RoleClient, Name: c.Name, Agents: c.Agents})
	}
	return ids
}

// ensureNKeys makes (or keeps) an NKey seed per identity.
func (s *Secrets) ensureNKeys() error {
	for _, id := range s.identities {
		name := nkeyName(id)
		pub, err := broker.EnsureNKeySeed(filepath.Join(s.dir, name))
		if err != nil {
			return err
		}
		s.nkeys[name] = pub
	}
	return nil
}

// ensureTokens makes the API's token and each agent's pair.
func (s *Secrets) ensureTokens() error {
	tokens := []string{APIToken}
	if s.spec.ViewerToken {
		tokens = append(tokens, ViewerToken)
	}
	for _, a := range s.spec.Agents {
		tokens = append(tokens, AgentToken(a.ID), AgentOrchestratorToken(a.ID))
	}
	for _, name := range tokens {
		if err := ensureToken(filepath.Join(s.dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// ensureCerts makes the CA, the broker's (or each node's) certificate, the API's
// when it has names, and with mutual TLS each identity's client certificate.
func (s *Secrets) ensureCerts() error {
	if _, _, err := broker.EnsureCA(s.dir); err != nil {
		return err
	}
	for _, n := range s.spec.Nodes {
		if _, _, err := broker.EnsureNodeCert(s.dir, n.Name, n.Hosts); err != nil {
			return err
		}
	}
	if s.spec.Nodes == nil {
		if _, _, err := broker.EnsureServerCert(s.dir, s.spec.BrokerHosts); err != nil {
			return err
		}
	}
	if s.spec.APIHosts != nil {
		if _, _, err := broker.EnsureNamedServerCert(s.dir, "api", s.spec.APIHosts); err != nil {
			return err
		}
	}
	if s.spec.MutualTLS {
		for _, id := range s.identities {
			if _, _, err := broker.EnsureClientCert(s.dir, certName(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureToken keeps the token in path, or writes a new one there (0600).
func ensureToken(path string) error {
	_, err := broker.ReadTokenFile(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return broker.WriteTokenFile(path, broker.NewToken())
}

// users are the broker's users: each identity's public key with the rights the
// subject table gives it.
func (s *Secrets) users() []broker.User {
	subj := broker.Subjects{Prefix: s.spec.Prefix}
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

// BrokerFile is the config of a single broker listening on listen, naming its
// certificate files under hostDir, where they are on the broker's host.
func (s *Secrets) BrokerFile(hostDir, listen string) broker.ServerFile {
	return broker.ServerFile{
		Listen: listen,
		Users:  s.users(),
		TLS: &broker.ServerTLS{CertFile: filepath.Join(hostDir, ServerCert), KeyFile: filepath.Join(hostDir, ServerKey),
			CAFile: filepath.Join(hostDir, CA), Verify: s.spec.MutualTLS},
	}
}

// NATSConfig is the nats section of id's config: urls, its NKey and TLS, with
// file paths under hostDir, where they are on id's host.
func (s *Secrets) NATSConfig(id broker.Identity, urls []string, hostDir string) broker.NATSConfig {
	c := broker.NATSConfig{URLs: urls, Prefix: s.spec.Prefix, NKeyFile: filepath.Join(hostDir, nkeyName(id)),
		TLS: broker.ClientTLS{CAFile: filepath.Join(hostDir, CA)}}
	if s.spec.Operator {
		c.NKeyFile, c.CredsFile = "", filepath.Join(hostDir, credsName(id))
	}
	if s.spec.MutualTLS {
		cert, key := clientCertFiles(id)
		c.TLS.CertFile, c.TLS.KeyFile = filepath.Join(hostDir, cert), filepath.Join(hostDir, key)
	}
	return c
}
