package orchestrator

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/orchestrator/enroll"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// Hosts join and leave through package enroll, a client of the running core
// (Admit, Forget) and of the broker's authority (natsjwt); the orchestrator
// makes it when its config has an enroll section, starts each core with the
// joined agents and hands the API's calls to it.

// newEnroller makes o's enroller, or none when the config has no enroll
// section.
func (o *Orchestrator) newEnroller() error {
	ec := o.cfg.Enroll
	if !ec.Enabled() {
		return nil
	}
	ca, der, err := ec.ca(o.cfg.NATS.TLS.CAFile)
	if err != nil {
		return err
	}
	o.enrollCA = der
	auth, err := natsjwt.LoadAuthority(natsjwt.AuthorityFiles{AccountSigningKeyFile: ec.AccountSigningKeyFile,
		OperatorSigningKeyFile: ec.OperatorSigningKeyFile, AccountPublicKey: ec.AccountPublicKey,
		SystemCredsFile: ec.SystemCredsFile})
	if err != nil {
		return fmt.Errorf("config: enroll: %w", err)
	}
	urls := ec.NATSURLs
	if len(urls) == 0 {
		urls = o.cfg.NATS.URLs
	}
	o.enroller = enroll.New(enroll.Params{Store: o.st, Log: o.log,
		Authority: brokerAuthority{auth: auth, subj: o.subj, conn: auth.SystemConnConfig(o.cfg.NATS.URLs, o.cfg.NATS.TLS)},
		Agents: func() enroll.Agents {
			if c := o.running.Load(); c != nil {
				return c
			}
			return nil
		},
		Configured: func(id string) *policy.AgentConfig {
			if i := slices.IndexFunc(o.sec.agents, func(a policy.AgentConfig) bool { return a.ID == id }); i >= 0 {
				return &o.sec.agents[i]
			}
			return nil
		},
		NATSURLs: urls, Prefix: o.cfg.NATS.Prefix, CAPEM: ca})
	return nil
}

// coreAgents are the agents a new core starts with (enroll.CoreAgents).
func (o *Orchestrator) coreAgents() ([]policy.AgentConfig, error) {
	if o.enroller == nil {
		return o.sec.agents, nil
	}
	return o.enroller.CoreAgents(o.sec.agents)
}

// restoreJoined brings a core that just started up to the joins and
// revocations made while it was being made.
func (o *Orchestrator) restoreJoined() {
	if o.enroller == nil {
		return
	}
	if err := o.enroller.Restore(); err != nil {
		o.log.Warn("renew the joined hosts", "err", err)
	}
}

// withCA adds the site CA to the API's certificate chain when the
// orchestrator enrolls: a joining host checks it against the fingerprint it
// was given before it sends its code.
func (o *Orchestrator) withCA(c *tls.Config) *tls.Config {
	if c == nil || o.enrollCA == nil {
		return c
	}
	c = c.Clone()
	cert := c.Certificates[0]
	cert.Certificate = append(slices.Clip(cert.Certificate), o.enrollCA)
	c.Certificates = []tls.Certificate{cert}
	return c
}

// brokerAuthority is enroll.Authority over natsjwt: identities for o's
// subjects, revocations pushed on a system connection made for each.
type brokerAuthority struct {
	auth *natsjwt.Authority
	subj broker.Subjects
	conn broker.ConnConfig
}

// IssueUser signs a joined agent's identity: its rights alone, no client's.
func (b brokerAuthority) IssueUser(id broker.Identity, userPub string) (string, error) {
	return b.auth.IssueUser(b.subj, id, nil, userPub)
}

// Revoke revokes userPub at the brokers.
func (b brokerAuthority) Revoke(ctx context.Context, userPub string) error {
	nc, err := broker.Connect(b.conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	return b.auth.Revoke(ctx, nc, userPub)
}

// The API's enrollment calls; the API has them only when o.enroller is set.

// Enroll makes a one-time join code for a new agent host.
func (b apiBackend) Enroll(_ context.Context, req api.EnrollRequest, caller string) (*api.EnrollCode, error) {
	return b.enroller.Enroll(req, caller)
}

// Enrollments lists the enrollments.
func (b apiBackend) Enrollments() ([]api.Enrollment, error) {
	return b.enroller.List()
}

// Enrollment returns agent id's enrollment.
func (b apiBackend) Enrollment(id string) (*api.Enrollment, error) {
	return b.enroller.Get(id)
}

// Join joins a host with its code.
func (b apiBackend) Join(req api.JoinRequest, from string) (*api.JoinGrant, error) {
	return b.enroller.Join(req, from)
}

// Revoke revokes agent id on behalf of caller.
func (b apiBackend) Revoke(ctx context.Context, id, caller string) (*api.Enrollment, error) {
	return b.enroller.Revoke(ctx, id, caller)
}
