package site

import "github.com/chiffon-dev/chiffon/broker"

// HostFiles are the secret files one host needs, and only those.
type HostFiles struct {
	// Host says whose host: "broker", a node's name, "orchestrator" or a group
	// member's name, "agent <id>" or "client <name>".
	Host string
	// Files are the file names in the secrets directory.
	Files []string
}

// HostFiles lists the secret files each host needs: the broker (or each node),
// the orchestrator (or each of a group), each agent and each client. No host
// gets the CA's key, nor in operator mode the operator's and the accounts'
// identity keys.
func (s *Secrets) HostFiles() []HostFiles {
	var rows []HostFiles
	if s.spec.Nodes == nil {
		rows = append(rows, HostFiles{"broker", []string{ServerCert, ServerKey, CA}})
	}
	for _, n := range s.spec.Nodes {
		rows = append(rows, HostFiles{n.Name, []string{n.Name + ".pem", n.Name + "-key.pem", CA}})
	}
	orch := s.orchestratorFiles()
	if s.spec.Orchestrators == nil {
		rows = append(rows, HostFiles{"orchestrator", orch})
	}
	for _, name := range s.spec.Orchestrators {
		rows = append(rows, HostFiles{name, orch})
	}
	for _, a := range s.spec.Agents {
		id := broker.Identity{Role: broker.RoleAgent, Name: a.ID}
		files := append([]string{s.identityFile(id), AgentToken(a.ID), AgentOrchestratorToken(a.ID), CA}, s.clientCert(id)...)
		rows = append(rows, HostFiles{"agent " + a.ID, files})
	}
	for _, c := range s.spec.Clients {
		id := broker.Identity{Role: broker.RoleClient, Name: c.Name}
		files := append([]string{s.identityFile(id), CA}, s.clientCert(id)...)
		for _, a := range c.Agents {
			files = append(files, AgentToken(a), AgentOrchestratorToken(a))
		}
		rows = append(rows, HostFiles{"client " + c.Name, files})
	}
	return rows
}

// orchestratorFiles are an orchestrator's: its identities, the API's token
// (and certificate) and each agent's token pair.
func (s *Secrets) orchestratorFiles() []string {
	files := append([]string{s.identityFile(orchID), APIToken, CA}, s.clientCert(orchID)...)
	files = append(append(files, s.identityFile(storeID)), s.clientCert(storeID)...)
	files = append(files, s.EnrollFiles()...)
	if s.spec.APIHosts != nil {
		files = append(files, APICert, APIKey)
	}
	for _, a := range s.spec.Agents {
		files = append(files, AgentToken(a.ID), AgentOrchestratorToken(a.ID))
	}
	return files
}

// clientCert is id's client certificate and key, with mutual TLS only.
func (s *Secrets) clientCert(id broker.Identity) []string {
	if !s.spec.MutualTLS {
		return nil
	}
	cert, key := clientCertFiles(id)
	return []string{cert, key}
}
