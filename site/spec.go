package site

// Spec says what a site holds: its identities and the names in its certificates.
type Spec struct {
	// Agents are the site's agent instances.
	Agents []Agent
	// Clients are identities for scripts that command agents directly.
	Clients []Client
	// BrokerHosts are the names and addresses in the broker's certificate.
	BrokerHosts []string
	// Nodes, when set, are the nodes of a broker cluster, each with its own
	// certificate, instead of one broker.
	Nodes []Node
	// Orchestrators are the names of a group's orchestrators
	// ("orchestrator-1", ...), or none for a single orchestrator.
	Orchestrators []string
	// APIHosts, when set, are the names in a certificate for the
	// orchestrator's HTTP API, which then serves HTTPS.
	APIHosts []string
	// MutualTLS gives every identity a client certificate the broker requires.
	MutualTLS bool
	// Prefix is the subject prefix; "" means broker.DefaultPrefix.
	Prefix string
	// ViewerToken adds a viewer's API token (ViewerToken) beside the
	// operator's, as chiffon up makes.
	ViewerToken bool
	// Operator runs the broker in NATS operator mode (operator.go): each
	// identity a .creds file instead of an NKey seed.
	Operator bool
}

// Agent is one agent instance of a site.
type Agent struct {
	// Type is the agent type: infra, desktop, code or research.
	Type string
	// ID is the instance id, unique in the site.
	ID string
}

// Client is a client identity and the agents it may command.
type Client struct {
	// Name is the identity's name, its NKey's client-<name>.nk.
	Name string
	// Agents are the ids of the agents it may command.
	Agents []string
}

// Node is one node of a broker cluster.
type Node struct {
	// Name is the node's name and its certificate's and config's, broker-<n>.
	Name string
	// Hosts are the names and addresses in its certificate.
	Hosts []string
}

// AgentIDs are the ids of agents, in order.
func AgentIDs(agents []Agent) []string {
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	return ids
}

// agentType is the type of agent id, or "".
func (s Spec) agentType(id string) string {
	for _, a := range s.Agents {
		if a.ID == id {
			return a.Type
		}
	}
	return ""
}
