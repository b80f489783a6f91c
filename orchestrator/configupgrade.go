package orchestrator

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ConfigVersion is the format of the config files this build reads and
// `chiffon init` writes (config_version). A file without the key is read as
// this one; a newer one is refused. The first release had no such key; its
// orchestrator configs are told apart by its top-level token_file.
const ConfigVersion = 2

// UpgradeDoc is where the docs say how to move a site from one release to the
// next.
const UpgradeDoc = "docs/upgrading.md"

// checkConfigVersion refuses config text b when it is of another release than
// this build reads: a newer config_version, or the first release's keys, every
// change named at once. nil when b is not YAML this check understands: the
// strict decode says what is wrong with it.
func checkConfigVersion(b []byte) error {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	top := root.Content[0]
	if v := mapValue(top, "config_version"); v != nil {
		var n int
		if v.Decode(&n) == nil && n > ConfigVersion {
			return fmt.Errorf("config: config_version: %d is a newer chiffon's; this build reads up to %d", n, ConfigVersion)
		}
		return nil
	}
	old := mapValue(top, "token_file")
	if old == nil {
		return nil
	}
	changes := []string{fmt.Sprintf("remove token_file (line %d): the one token the orchestrator sent every agent "+
		"is gone, each agent has its own (agents[].orchestrator_token_file)", old.Line)}
	changes = append(changes, agentChanges(mapValue(top, "agents"))...)
	return fmt.Errorf("config: this is the first release's orchestrator config; change:\n  - %s\n"+
		"`chiffon init --force` over the old site writes this release's configs and keeps its tokens (%s)",
		strings.Join(changes, "\n  - "), UpgradeDoc)
}

// firstReleaseID is the id `chiffon init` of the first release gave an agent
// of a type: <type>-<n>.
var firstReleaseID = regexp.MustCompile(`^(infra|desktop|code|research)-\d+$`)

// agentChanges names what each entry of the first release's agents list lacks.
func agentChanges(agents *yaml.Node) []string {
	if agents == nil || agents.Kind != yaml.SequenceNode {
		return nil
	}
	var out []string
	for i, a := range agents.Content {
		if a.Kind != yaml.MappingNode {
			continue
		}
		id := ""
		if v := mapValue(a, "id"); v != nil {
			id = v.Value
		}
		key := fmt.Sprintf("agents[%d] (%s)", i, id)
		if mapValue(a, "type") == nil {
			hint := "infra, desktop, code or research, as the agent's own config says"
			if m := firstReleaseID.FindStringSubmatch(id); m != nil {
				hint = m[1] + ", by its id (as its own config says)"
			}
			out = append(out, fmt.Sprintf("%s: add type: %s", key, hint))
		}
		if mapValue(a, "orchestrator_token_file") == nil {
			out = append(out, key+": add orchestrator_token_file: the token the orchestrator sends this agent alone, the same file as its config's orchestrator_token_file")
		}
	}
	return out
}

// mapValue is the value of key in mapping node m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
