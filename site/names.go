package site

import "github.com/chiffon-dev/chiffon/broker"

// Names of a site's secret files, in its secrets directory.
const (
	// APIToken is the HTTP API's bearer token.
	APIToken = "api.token"
	// ViewerToken is a viewer's API token, which Spec.ViewerToken asks for.
	ViewerToken = "viewer.token"
	// OrchestratorNKey is the orchestrator's NATS identity.
	OrchestratorNKey = "orchestrator.nk"
	// StoreNKey is the NATS identity of the orchestrators' JetStream store
	// connection, the only one that may write the store.
	StoreNKey = "orchestrator-store.nk"
	// CA is the site CA's certificate, which every host trusts.
	CA = "ca.pem"
	// ServerCert is the broker's certificate.
	ServerCert = "server.pem"
	// ServerKey is the broker's private key.
	ServerKey = "server-key.pem"
	// APICert is the HTTP API's certificate, when it is served beyond loopback.
	APICert = "api.pem"
	// APIKey is the HTTP API's private key.
	APIKey = "api-key.pem"
)

// AgentToken is the file of the token agent id sends; the orchestrator checks it.
func AgentToken(id string) string { return "agent-" + id + ".token" }

// AgentOrchestratorToken is the file of the token the orchestrator (or a
// client) sends to agent id alone.
func AgentOrchestratorToken(id string) string { return "agent-" + id + ".orchestrator.token" }

// AgentNKey is the file of agent id's NATS identity.
func AgentNKey(id string) string { return "agent-" + id + ".nk" }

func clientNKeyName(name string) string { return "client-" + name + ".nk" }

// storeID is the identity of a group's JetStream store connection.
var storeID = broker.Identity{Role: broker.RoleStore}

// orchID is the orchestrator's own identity.
var orchID = broker.Identity{Role: broker.RoleOrchestrator}

// nkeyName is the seed file name of an identity.
func nkeyName(id broker.Identity) string {
	switch id.Role {
	case broker.RoleAgent:
		return AgentNKey(id.Name)
	case broker.RoleClient:
		return clientNKeyName(id.Name)
	case broker.RoleStore:
		return StoreNKey
	}
	return OrchestratorNKey
}

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

// clientCertFiles are the certificate and key file names of id's client
// certificate.
func clientCertFiles(id broker.Identity) (cert, key string) {
	return "client-" + certName(id) + ".pem", "client-" + certName(id) + "-key.pem"
}
