package site

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
)

// The first release kept a site's tokens, and `chiffon up`'s, in tokens/:
// api.token, <id>.token for each agent, and orchestrator.token, the one token
// the orchestrator sent every agent. Its successor keeps them in secrets/ under
// the names of names.go, and gives each agent a pair of its own, so that an
// agent cannot pose as the orchestrator to the others.

// LegacyTokensDir is the first release's tokens directory, under a site's dir
// or an up data dir.
const LegacyTokensDir = "tokens"

// legacyOrchestratorToken is the first release's one orchestrator token.
const legacyOrchestratorToken = "orchestrator.token"

// ImportLegacyTokens copies the tokens of dir's tokens/ into the secrets dir
// secrets (made 0700 if missing), each where this release keeps it, keeping
// any token secrets already holds: the API's token, and each agent's own. The
// one orchestrator token of the first release is not carried over: each agent
// gets a pair of its own when the secrets are made. It returns what it did, a
// line each; none when dir has no tokens/. It never writes a token's value in
// a line.
func ImportLegacyTokens(dir, secrets string) ([]string, error) {
	old := filepath.Join(dir, LegacyTokensDir)
	entries, err := os.ReadDir(old)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return nil, err
	}
	var done, agents []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".token") || name == legacyOrchestratorToken {
			continue
		}
		to := APIToken
		if name != APIToken {
			id := strings.TrimSuffix(name, ".token")
			to = AgentToken(id)
			agents = append(agents, id)
		}
		kept, err := importToken(filepath.Join(old, name), filepath.Join(secrets, to))
		if err != nil {
			return nil, err
		}
		if kept && name == APIToken {
			done = append(done, fmt.Sprintf("kept the API token: %s is now %s", rel(dir, old, name), rel(dir, secrets, to)))
		}
	}
	slices.Sort(agents)
	if len(agents) > 0 {
		done = append(done, fmt.Sprintf("kept the agents' own tokens (%s): %s/<id>.token is now %s", strings.Join(agents, ", "),
			rel(dir, old, ""), rel(dir, secrets, AgentToken("<id>"))))
	}
	if _, err := os.Stat(filepath.Join(old, legacyOrchestratorToken)); err == nil {
		done = append(done, fmt.Sprintf("retired %s, the one token every agent took from the orchestrator: each agent gets a pair of its own (%s)",
			rel(dir, old, legacyOrchestratorToken), rel(dir, secrets, AgentOrchestratorToken("<id>"))))
	}
	return done, nil
}

// importToken copies the token in from to to, unless to holds one; it reports
// whether it copied.
func importToken(from, to string) (bool, error) {
	if _, err := os.Stat(to); err == nil {
		return false, nil
	}
	tok, err := broker.ReadTokenFile(from)
	if err != nil {
		return false, err
	}
	return true, broker.WriteTokenFile(to, tok)
}

// rel is dir/name under base, as a path relative to base for messages.
func rel(base, dir, name string) string {
	p := filepath.Join(dir, name)
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}

// DataDirFormat is the format of a `chiffon up` data dir this build writes,
// kept in its file "format": 1, the first release's (no such file, tokens/);
// 2, this one's (secrets/). A data dir made in operator mode has
// DataDirOperatorFormat instead.
const DataDirFormat = 2

// dataDirFormatFile holds a data dir's format.
const dataDirFormatFile = "format"

// UpgradeDataDir brings `chiffon up`'s data dir to DataDirFormat and records
// it, and returns what it changed, a line each: a first release's tokens are
// carried into secrets/ (ImportLegacyTokens) and tokens/ removed. It refuses a
// data dir a newer build wrote. A new or empty dir is only stamped; a dir made
// in operator mode (DataDirOperatorFormat) is left as it is.
func UpgradeDataDir(dir string) ([]string, error) {
	n, err := readDataDirFormat(dir)
	if err != nil || n >= DataDirFormat {
		return nil, err
	}
	done, err := ImportLegacyTokens(dir, filepath.Join(dir, "secrets"))
	if err != nil {
		return nil, fmt.Errorf("data dir %s: carry the first release's tokens over: %w", dir, err)
	}
	if done != nil {
		if err := os.RemoveAll(filepath.Join(dir, LegacyTokensDir)); err != nil {
			return nil, err
		}
		done = append(done, "removed "+LegacyTokensDir+"/: its tokens live in secrets/ now")
	}
	if err := writeDataDirFormat(dir, DataDirFormat); err != nil {
		return nil, err
	}
	return done, nil
}
