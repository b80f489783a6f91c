package orchestrator

import (
	"crypto/subtle"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/httpapi"
)

// The roles of API tokens (package httpapi's).
const (
	// RoleViewer reads tasks, their events and output, and the agents.
	RoleViewer = httpapi.RoleViewer
	// RoleOperator also submits and cancels tasks. The token of api_token_file
	// is an operator's.
	RoleOperator = httpapi.RoleOperator
)

// APITokenConfig is an API token beyond api_token_file's, with its role.
type APITokenConfig struct {
	// Name names the token in the tasks' history (who submitted, cancelled,
	// approved); "" means the token file's name without its extension.
	Name string `yaml:"name"`
	// TokenFile holds the token.
	TokenFile string `yaml:"token_file"`
	// Role is RoleViewer or RoleOperator.
	Role string `yaml:"role"`
	// Token may be set instead of TokenFile (by tests or an embedding program).
	Token string `yaml:"-"`
}

func (c APITokenConfig) validate(key string) error {
	if c.Role != RoleViewer && c.Role != RoleOperator {
		return fmt.Errorf("config: %s.role: must be %s or %s, got %q", key, RoleViewer, RoleOperator, c.Role)
	}
	if c.TokenFile == "" && c.Token == "" {
		return fmt.Errorf("config: %s.token_file: is required", key)
	}
	return nil
}

// tokenName is the name of a token: the one configured, else its file's name
// without the extension, else def.
func tokenName(name, file, def string) string {
	if name != "" {
		return name
	}
	if file != "" {
		base := filepath.Base(file)
		return strings.TrimSuffix(base, filepath.Ext(base))
	}
	return def
}

// readAPITokens reads every API token: api_token_file's, an operator's, first.
func (c Config) readAPITokens() ([]httpapi.Token, error) {
	first := c.APIToken
	if first == "" {
		var err error
		if first, err = broker.ReadTokenFile(c.APITokenFile); err != nil {
			return nil, fmt.Errorf("config: api_token_file: %w", err)
		}
	}
	out := []httpapi.Token{{Secret: []byte(first), Name: tokenName("", c.APITokenFile, "api"), Role: RoleOperator}}
	for i, t := range c.APITokens {
		tok := t.Token
		if tok == "" {
			var err error
			if tok, err = broker.ReadTokenFile(t.TokenFile); err != nil {
				return nil, fmt.Errorf("config: api_tokens[%d].token_file: %w", i, err)
			}
		}
		for _, prev := range out {
			if subtle.ConstantTimeCompare(prev.Secret, []byte(tok)) == 1 {
				return nil, fmt.Errorf("config: api_tokens[%d]: the same token as another API token", i)
			}
		}
		out = append(out, httpapi.Token{Secret: []byte(tok), Name: tokenName(t.Name, t.TokenFile, fmt.Sprintf("api_tokens[%d]", i)), Role: t.Role})
	}
	return out, nil
}

// Authenticate returns the role of an API token, and false for a token the
// orchestrator does not know. Every known token is compared in constant time.
func (o *Orchestrator) Authenticate(token string) (role string, ok bool) {
	return o.api.Authenticate(token)
}
