// Package site makes a site: every identity of one Chiffon (the orchestrator,
// its agents and the clients that script against agents) and the files each
// of them runs with. `chiffon init` writes one for several hosts (Options,
// Layout) and `chiffon up` keeps one in its data dir (Ensure); both make the
// same files in one secrets directory (0700), each file 0600 unless it is a
// certificate:
//
//	api.token                              the HTTP API's bearer token
//	viewer.token                           a viewer's API token (chiffon up only)
//	agent-<id>.token                       what the agent sends; the orchestrator checks it
//	agent-<id>.orchestrator.token          what the orchestrator sends to that agent alone
//	orchestrator.nk, agent-<id>.nk,        NATS identities (NKey seeds)
//	client-<name>.nk
//	orchestrator-store.nk                  the orchestrator's JetStream store
//	                                       connection (store.kind jetstream, as
//	                                       init --ha writes), the only identity that
//	                                       may write the store
//	ca.pem, ca-key.pem                     the site CA
//	server.pem, server-key.pem             the broker's certificate
//	broker-<n>.pem, broker-<n>-key.pem     instead, in a cluster, each node's
//	api.pem, api-key.pem                   the HTTP API's certificate, when it is served
//	                                       beyond loopback
//	client-<identity>.pem, -key.pem        client certificates, with mutual TLS only
//
// In operator mode (Spec.Operator, init --operator) each identity has instead
// of its NKey seed a .creds file (orchestrator.creds, agent-<id>.creds, ...), a
// user JWT of the site's account and its seed, and the secrets directory holds
// the keys of package broker/natsjwt:
//
//	operator.nk, account.nk,               identity keys: they sign only what init
//	system-account.nk                      signs; keep them off every host
//	operator-signer.nk, account-signer.nk  the orchestrator's: sign the account (its
//	orchestrator-sys.creds                 revocations) and users, push the account
//	operator.jwt, account.jwt,             the JWTs broker.conf carries, kept so that
//	system-account.jwt                     init writes the same ones again
//
// The broker's users and their rights come from broker.Subjects.Permissions;
// this package only names the identities and writes the files.
package site
