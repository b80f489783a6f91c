package site

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/broker"
)

// Write writes the site under Dir: its secrets (kept when they exist, and a
// first release's tokens/ carried over: ImportLegacyTokens), the
// broker's config (or each node's), the orchestrators', each agent's and each
// client's notes. It refuses before anything is made when a config exists and
// Force is off: a new NKey without the broker config that lists it would lock
// its daemon out.
func (l *Layout) Write() (*Secrets, error) {
	for _, path := range l.configFiles() {
		if err := refuseOverwrite(path, l.Force); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"agents", "clients"} {
		if err := os.MkdirAll(filepath.Join(l.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	secrets := filepath.Join(l.Dir, "secrets")
	imported, err := ImportLegacyTokens(l.Dir, secrets)
	if err != nil {
		return nil, fmt.Errorf("carry the first release's tokens over: %w", err)
	}
	st, err := Ensure(secrets, l.Spec)
	if err != nil {
		return nil, err
	}
	st.Imported = imported
	if err := l.writeBrokerFiles(st); err != nil {
		return nil, err
	}
	allowed, err := l.writeAgentConfigs(st)
	if err != nil {
		return nil, err
	}
	for _, orch := range l.Orchestrators {
		if err := l.writeOrchConfig(st, orch, allowed); err != nil {
			return nil, err
		}
	}
	for _, c := range l.Clients {
		if err := l.writeClientNotes(st, c); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// configFiles are the paths of every config Write writes.
func (l *Layout) configFiles() []string {
	var paths []string
	if l.Nodes == nil {
		paths = append(paths, filepath.Join(l.Dir, "broker.conf"))
	}
	for _, n := range l.Nodes {
		paths = append(paths, filepath.Join(l.Dir, n.Name+".conf"))
	}
	for _, orch := range l.Orchestrators {
		paths = append(paths, filepath.Join(l.Dir, orch.File))
	}
	for _, a := range l.Agents {
		paths = append(paths, filepath.Join(l.Dir, "agents", a.ID+".yaml"))
	}
	for _, c := range l.Clients {
		paths = append(paths, filepath.Join(l.Dir, "clients", c.Name+".txt"))
	}
	return paths
}

// writeBrokerFiles writes broker.conf, or each node's broker-<n>.conf, each
// with its WebSocket listener when the site has one.
func (l *Layout) writeBrokerFiles(st *Secrets) error {
	if l.Nodes == nil {
		f := st.WithOperator(st.BrokerFile(l.SecretsDir, l.BrokerListen), l.resolverDir())
		f.Websocket = l.websocketFile(0, f.TLS)
		return broker.WriteServerFile(filepath.Join(l.Dir, "broker.conf"), f)
	}
	for i, n := range l.Nodes {
		f := st.nodeFile(n, l.SecretsDir, l.DataRoot)
		f.Websocket = l.websocketFile(i, f.TLS)
		if err := broker.WriteServerFile(filepath.Join(l.Dir, n.Name+".conf"), f); err != nil {
			return err
		}
	}
	return nil
}
