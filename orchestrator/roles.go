package orchestrator

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
)

// The roles of API tokens.
const (
	// RoleViewer reads tasks, their events and output, and the agents.
	RoleViewer = "viewer"
	// RoleOperator also submits and cancels tasks. The token of api_token_file
	// is an operator's.
	RoleOperator = "operator"
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

// apiToken is an API token, its name and its role.
type apiToken struct {
	token []byte
	name  string
	role  string
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
func (c Config) readAPITokens() ([]apiToken, error) {
	first := c.APIToken
	if first == "" {
		var err error
		if first, err = broker.ReadTokenFile(c.APITokenFile); err != nil {
			return nil, fmt.Errorf("config: api_token_file: %w", err)
		}
	}
	out := []apiToken{{token: []byte(first), name: tokenName("", c.APITokenFile, "api"), role: RoleOperator}}
	for i, t := range c.APITokens {
		tok := t.Token
		if tok == "" {
			var err error
			if tok, err = broker.ReadTokenFile(t.TokenFile); err != nil {
				return nil, fmt.Errorf("config: api_tokens[%d].token_file: %w", i, err)
			}
		}
		for _, prev := range out {
			if subtle.ConstantTimeCompare(prev.token, []byte(tok)) == 1 {
				return nil, fmt.Errorf("config: api_tokens[%d]: the same token as another API token", i)
			}
		}
		out = append(out, apiToken{token: []byte(tok), name: tokenName(t.Name, t.TokenFile, fmt.Sprintf("api_tokens[%d]", i)), role: t.Role})
	}
	return out, nil
}

// Authenticate returns the role of an API token, and false for a token the
// orchestrator does not know. Every known token is compared in constant time.
func (o *Orchestrator) Authenticate(token string) (role string, ok bool) {
	_, role, ok = o.identify(token)
	return role, ok
}

// identify returns the name and role of an API token, comparing it with every
// known token in constant time.
func (o *Orchestrator) identify(token string) (name, role string, ok bool) {
	for _, t := range o.sec.apiTokens {
		if subtle.ConstantTimeCompare(t.token, []byte(token)) == 1 {
			name, role, ok = t.name, t.role, true
		}
	}
	return name, role, ok
}

type roleKey struct{}

type callerKey struct{}

// WithRole returns ctx carrying an authenticated caller's role.
func WithRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

// RoleOf is the role WithRole put in ctx, or "".
func RoleOf(ctx context.Context) string {
	role, _ := ctx.Value(roleKey{}).(string)
	return role
}

// WithCaller returns ctx carrying the name of the caller's API token, which the
// tasks' history records.
func WithCaller(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callerKey{}, name)
}

// CallerOf is the name WithCaller put in ctx, or "".
func CallerOf(ctx context.Context) string {
	name, _ := ctx.Value(callerKey{}).(string)
	return name
}

// operatorOnly refuses, with 403, a caller whose token is not an operator's.
func operatorOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if role := RoleOf(r.Context()); role != RoleOperator {
			writeError(w, http.StatusForbidden, "forbidden", "Authorization",
				fmt.Sprintf("a %s token may read, not act (submit, cancel, batches, schedules); an %s's may", role, RoleOperator))
			return
		}
		h(w, r)
	}
}
