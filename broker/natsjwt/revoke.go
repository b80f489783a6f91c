package natsjwt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// maxClockSkew is how far in the future the servers' account JWT may have been
// issued (by a host whose clock is ahead) before Revoke gives up waiting to
// issue a later one.
const maxClockSkew = 10 * time.Second

// Revoke revokes userPub (every JWT issued for it up to now) in the account: it reads the account's current JWT from the
// servers (CLAIMS.LOOKUP), adds the revocation, signs it with the operator's signing key and pushes it (CLAIMS.UPDATE)
// on nc (a connection as the system user: see SystemConnConfig), and returns once a server accepted it. The servers then close
// the user's live connections and refuse it afterwards.
//
// The revocations this Authority pushed before are kept even if the server
// that answers the lookup has not seen them yet. The new JWT is issued in a
// later second than the one it replaces (Revoke waits for it, up to a second):
// a JWT's id (jti) hashes its issuer, subject, name and issue time, not the
// revocations, and a server that syncs the account from its peers, or
// preloads it at a restart, keeps the JWT it holds when the other has its id,
// or an earlier issue time.
func (a *Authority) Revoke(ctx context.Context, nc *nats.Conn, userPub string) error {
	if !nkeys.IsValidPublicUserKey(userPub) {
		return fmt.Errorf("natsjwt: revoke: %q is not a public user key", userPub)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	current, err := a.lookup(ctx, nc)
	if err != nil {
		return err
	}
	c := a.withPushed(current)
	if err := waitPast(ctx, c.IssuedAt); err != nil {
		return fmt.Errorf("natsjwt: revoke %s: %w", userPub, err)
	}
	c.Revoke(userPub)
	token, err := c.Encode(a.operatorSigner.kp)
	if err != nil {
		return fmt.Errorf("natsjwt: revoke %s: sign the account: %w", userPub, err)
	}
	if err := a.push(ctx, nc, token); err != nil {
		return fmt.Errorf("natsjwt: revoke %s: %w", userPub, err)
	}
	a.last = c
	return nil
}

// lookup asks the servers for the account's JWT.
func (a *Authority) lookup(ctx context.Context, nc *nats.Conn) (*jwt.AccountClaims, error) {
	msg, err := nc.RequestWithContext(ctx, claimsSubject(a.account, "LOOKUP"), nil)
	if err != nil {
		return nil, fmt.Errorf("natsjwt: look up account %s: %w", a.account, err)
	}
	if len(msg.Data) == 0 {
		return nil, fmt.Errorf("natsjwt: look up account %s: the server holds no JWT of it", a.account)
	}
	c, err := jwt.DecodeAccountClaims(string(msg.Data))
	if err != nil || c.Subject != a.account {
		return nil, fmt.Errorf("natsjwt: look up account %s: the server's answer is not the account's JWT", a.account)
	}
	return c, nil
}

// withPushed is the later of current and the account this Authority last
// pushed, with the revocations of both.
func (a *Authority) withPushed(current *jwt.AccountClaims) *jwt.AccountClaims {
	if a.last == nil {
		return current
	}
	base, other := current, a.last
	if a.last.IssuedAt > current.IssuedAt {
		// A server that has not yet seen the last push answered.
		base, other = a.last, current
	}
	out := *base
	out.Revocations = jwt.RevocationList{}
	for _, r := range []jwt.RevocationList{base.Revocations, other.Revocations} {
		for pub, at := range r {
			out.RevokeAt(pub, time.Unix(at, 0))
		}
	}
	return &out
}

// waitPast waits until the clock is past the second issuedAt (a JWT's iat).
func waitPast(ctx context.Context, issuedAt int64) error {
	next := time.Unix(issuedAt+1, 0)
	wait := time.Until(next)
	if wait <= 0 {
		return nil
	}
	if wait > maxClockSkew+time.Second {
		return fmt.Errorf("the account's JWT was issued at %s, %s from now: check the clocks of this host and of the one that signed it",
			time.Unix(issuedAt, 0).UTC().Format(time.RFC3339), wait.Round(time.Second))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// push sends the account's new JWT to the servers and waits for the first
// answer, which must be an acceptance.
func (a *Authority) push(ctx context.Context, nc *nats.Conn, token string) error {
	msg, err := nc.RequestWithContext(ctx, claimsSubject(a.account, "UPDATE"), []byte(token))
	if err != nil {
		return fmt.Errorf("push the account's JWT: %w", err)
	}
	var resp server.ServerAPIClaimUpdateResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("push the account's JWT: the server's answer does not decode: %w", err)
	}
	switch {
	case resp.Error != nil:
		return fmt.Errorf("push the account's JWT: the server refused it (%d): %s", resp.Error.Code, resp.Error.Description)
	case resp.Data == nil || resp.Data.Code != 200:
		return fmt.Errorf("push the account's JWT: the server did not accept it")
	}
	return nil
}
