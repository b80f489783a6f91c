package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// The roles of API tokens.
const (
	// RoleViewer reads tasks, their events and output, and the agents.
	RoleViewer = "viewer"
	// RoleOperator also submits and cancels tasks. The token of api_token_file
	// is an operator's.
	RoleOperator = "operator"
)

// Token is an API token, its name and its role.
type Token struct {
	// Secret is the token itself.
	Secret []byte
	// Name names the token in the tasks' history (who submitted, cancelled,
	// approved).
	Name string
	// Role is RoleViewer or RoleOperator.
	Role string
}

// Authenticate returns the role of an API token, and false for a token the
// API does not know. Every known token is compared in constant time.
func (a *API) Authenticate(token string) (role string, ok bool) {
	_, role, ok = a.identify(token)
	return role, ok
}

// identify returns the name and role of an API token, comparing it with every
// known token in constant time.
func (a *API) identify(token string) (name, role string, ok bool) {
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(t.Secret, []byte(token)) == 1 {
			name, role, ok = t.Name, t.Role, true
		}
	}
	return name, role, ok
}

// requireToken refuses a request without an API bearer token, and gives the
// handler the token's role (RoleOf).
func (a *API) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name, role, known := a.identify(got)
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chiffon"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "Authorization", "a valid bearer token is required")
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(WithRole(r.Context(), role), name)))
	})
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
				fmt.Sprintf("a %s token may read, not act (submit, cancel, batches, schedules, workflows); an %s's may", role, RoleOperator))
			return
		}
		h(w, r)
	}
}
