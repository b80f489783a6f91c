package site

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/examples"
	"github.com/nats-io/jwt/v2"
)

// Joined is where a host that joined a site keeps what it was given
// (chiffon agent join): Dir/agent.yaml, Dir/secrets/ (0700) with the agent's
// .creds, its two tokens and the CA, each 0600, and its data in DataDir.
type Joined struct {
	Dir     string
	DataDir string
	// Force replaces files already there.
	Force bool
}

// ConfigPath is the agent's config file.
func (j Joined) ConfigPath() string { return filepath.Join(j.Dir, "agent.yaml") }

func (j Joined) secrets() string { return filepath.Join(j.Dir, "secrets") }

// files are what Write writes for agent id, config first.
func (j Joined) files(id string) []string {
	s := j.secrets()
	return []string{j.ConfigPath(), filepath.Join(s, "agent-"+id+".creds"), filepath.Join(s, AgentToken(id)),
		filepath.Join(s, AgentOrchestratorToken(id)), filepath.Join(s, CA)}
}

// Check fails when Write would replace a file and Force is off: a join
// checks it before it uses its code. id is the agent id the host expects, or
// "" when it does not say: then the files named after the id are not checked.
func (j Joined) Check(id string) error {
	if j.Force {
		return nil
	}
	paths := []string{j.ConfigPath(), filepath.Join(j.secrets(), CA)}
	if id != "" {
		paths = j.files(id)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists; pass --force to replace it", p)
		}
	}
	return nil
}

// Write writes what g gives the host, with the seed of the NATS key it made
// (its .creds file holds both), and the agent's config from the example of
// its type, and returns the config's path.
func (j Joined) Write(g *api.JoinGrant, seed []byte) (string, error) {
	creds, err := jwt.FormatUserConfig(g.UserJWT, seed)
	if err != nil {
		return "", fmt.Errorf("make the .creds file: %w", err)
	}
	paths := j.files(g.AgentID)
	if err := os.MkdirAll(j.secrets(), 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(j.secrets(), 0o700); err != nil {
		return "", err
	}
	for i, data := range [][]byte{creds, []byte(g.Token + "\n"), []byte(g.OrchestratorToken + "\n"), []byte(g.CAPEM)} {
		if err := writeSecretFile(paths[i+1], data, j.Force); err != nil {
			return "", err
		}
	}
	doc, err := exampleDoc(examples.AgentConfig(string(g.Type)))
	if err != nil {
		return "", err
	}
	nats := map[string]any{"urls": g.NATSURLs, "creds_file": paths[1], "tls": map[string]string{"ca_file": paths[4]}}
	if g.Prefix != "" {
		nats["prefix"] = g.Prefix
	}
	edits := []yamlEdit{{nats, []string{"nats"}}, {g.AgentID, []string{"id"}},
		{paths[2], []string{"token_file"}}, {paths[3], []string{"orchestrator_token_file"}},
		{j.DataDir, []string{"data_dir"}}}
	if len(g.Labels) > 0 {
		edits = append(edits, yamlEdit{g.Labels, []string{"labels"}})
	}
	if err := applyEdits(doc, edits); err != nil {
		return "", err
	}
	doc.remove("name")
	if err := writeConfig(paths[0], doc, j.Force); err != nil {
		return "", err
	}
	return paths[0], nil
}

// writeSecretFile writes data to path, 0600, refusing to replace a file
// unless force.
func writeSecretFile(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to replace it", path)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
