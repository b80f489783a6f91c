package site

import (
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
)

// A site in operator mode (Spec.Operator) has, instead of an NKey seed per
// identity, a .creds file (a user JWT of the site's account, then the seed),
// and the keys of package natsjwt: the broker learns a new identity from its
// JWT and forgets a revoked one without a restart.

// ensureOperator makes (or keeps) the operator's keys and JWTs and a .creds
// file per identity, each keeping its user key and getting a JWT issued anew
// with the identity's rights.
func (s *Secrets) ensureOperator() error {
	site, err := natsjwt.EnsureSite(s.dir)
	if err != nil {
		return err
	}
	auth, err := natsjwt.LoadAuthority(site.Authority)
	if err != nil {
		return err
	}
	subj := broker.Subjects{Prefix: s.spec.Prefix}
	for _, id := range s.identities {
		pub, err := natsjwt.EnsureCreds(filepath.Join(s.dir, credsName(id)), func(userPub string) (string, error) {
			return auth.IssueUser(subj, id, s.identities, userPub)
		})
		if err != nil {
			return err
		}
		s.nkeys[credsName(id)] = pub
	}
	s.operator = site
	return nil
}

// WithOperator is f in operator mode, its servers keeping the account JWTs
// they are given in resolverDir; f as it is on a site of NKey users.
func (s *Secrets) WithOperator(f broker.ServerFile, resolverDir string) broker.ServerFile {
	if s.operator == nil {
		return f
	}
	f.Users = nil
	f.Operator = s.operator.ServerOperator(resolverDir)
	return f
}

// identityFile is the name of id's identity file: its .creds in operator mode,
// else its NKey seed.
func (s *Secrets) identityFile(id broker.Identity) string {
	if s.spec.Operator {
		return credsName(id)
	}
	return nkeyName(id)
}

// credsName is the .creds file name of an identity.
func credsName(id broker.Identity) string {
	return strings.TrimSuffix(nkeyName(id), ".nk") + ".creds"
}

// EnrollFiles are the files an orchestrator of an operator-mode site enrolls
// and revokes identities with, by name in the secrets directory; nil on a site
// of NKey users.
func (s *Secrets) EnrollFiles() []string {
	if !s.spec.Operator {
		return nil
	}
	return []string{natsjwt.AccountSignerSeed, natsjwt.OperatorSignerSeed, natsjwt.SystemCreds}
}

// Authority names the files an orchestrator of an operator-mode site enrolls
// and revokes with, under the secrets dir Ensure made them in; nil on a site
// of NKey users.
func (s *Secrets) Authority() *natsjwt.AuthorityFiles {
	if s.operator == nil {
		return nil
	}
	a := s.operator.Authority
	return &a
}

// enrollEdit is the enroll section of an orchestrator's config in operator
// mode, naming the files under the secrets dir on its host.
func (l *Layout) enrollEdit(st *Secrets) []yamlEdit {
	if st.operator == nil {
		return nil
	}
	enroll := struct {
		AccountSigningKeyFile  string `yaml:"account_signing_key_file"`
		OperatorSigningKeyFile string `yaml:"operator_signing_key_file"`
		AccountPublicKey       string `yaml:"account_public_key"`
		SystemCredsFile        string `yaml:"system_creds_file"`
	}{l.onHost(natsjwt.AccountSignerSeed), l.onHost(natsjwt.OperatorSignerSeed), st.operator.Authority.AccountPublicKey,
		l.onHost(natsjwt.SystemCreds)}
	return []yamlEdit{{enroll, []string{"enroll"}}}
}

// resolverDir is where the single broker keeps its account JWTs.
func (l *Layout) resolverDir() string { return filepath.Join(l.DataRoot, "broker", "jwt") }

// useCreds makes the nats section of a config name a .creds file where the
// example names an NKey seed, keeping the line's comment.
func useCreds(doc *yamlDoc) {
	if nats := lookup(doc.root.Content[0], "nats"); nats != nil {
		for i := 0; i+1 < len(nats.Content); i += 2 {
			if nats.Content[i].Value == "nkey_file" {
				nats.Content[i].Value = "creds_file"
			}
		}
	}
}
