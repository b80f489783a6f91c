package natsjwt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// AuthorityFiles are where an orchestrator finds what it needs to enroll and revoke.
type AuthorityFiles struct {
	AccountSigningKeyFile  string // seed of the account's signing key: signs users
	OperatorSigningKeyFile string // seed of the operator's signing key: signs the account with its revocations
	AccountPublicKey       string // the CHIFFON account's public key ("A...")
	SystemCredsFile        string // creds of the system account's user: pushes the account's JWT
}

// Authority enrolls and revokes a site's identities: it signs user JWTs with
// the account's signing key, and the account's JWT, with its revocations, with
// the operator's. Its methods may be called from several goroutines.
type Authority struct {
	account        string
	accountSigner  key
	operatorSigner key
	systemCreds    string

	// mu serializes revocations; last is the account as this Authority last
	// pushed it, whose revocations a later push keeps even when a server that
	// has not seen it yet answers the lookup.
	mu   sync.Mutex
	last *jwt.AccountClaims
}

// LoadAuthority reads the signing keys of f and checks its other fields. Its
// errors name the files, never what they hold.
func LoadAuthority(f AuthorityFiles) (*Authority, error) {
	if !nkeys.IsValidPublicAccountKey(f.AccountPublicKey) {
		return nil, fmt.Errorf("natsjwt: account public key %q is not a public account key", f.AccountPublicKey)
	}
	accountSigner, err := loadSeed(f.AccountSigningKeyFile, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, fmt.Errorf("natsjwt: account signing key: %w", err)
	}
	operatorSigner, err := loadSeed(f.OperatorSigningKeyFile, nkeys.PrefixByteOperator)
	if err != nil {
		return nil, fmt.Errorf("natsjwt: operator signing key: %w", err)
	}
	if err := checkCreds(f.SystemCredsFile); err != nil {
		return nil, fmt.Errorf("natsjwt: system creds: %w", err)
	}
	return &Authority{account: f.AccountPublicKey, accountSigner: accountSigner, operatorSigner: operatorSigner,
		systemCreds: f.SystemCredsFile}, nil
}

// IssueUser returns a user JWT for userPub with id's permissions (site lists every identity, for client rules; may be nil).
// The JWT is signed by the account's signing key, names id, and has no expiry:
// only a revocation (Revoke) ends it.
func (a *Authority) IssueUser(s broker.Subjects, id broker.Identity, site []broker.Identity, userPub string) (string, error) {
	if !nkeys.IsValidPublicUserKey(userPub) {
		return "", fmt.Errorf("natsjwt: %q is not a public user key", userPub)
	}
	return issueUser(a.accountSigner, a.account, s, id, site, userPub)
}

// issueUser signs userPub's JWT with signer, a signing key of account.
func issueUser(signer key, account string, s broker.Subjects, id broker.Identity, site []broker.Identity, userPub string) (string, error) {
	c := jwt.NewUserClaims(userPub)
	c.Name = IdentityName(id)
	c.IssuerAccount = account
	p := s.Permissions(id, site)
	c.Pub, c.Sub = permission(p.Publish), permission(p.Subscribe)
	token, err := c.Encode(signer.kp)
	if err != nil {
		return "", fmt.Errorf("natsjwt: user %s: %w", c.Name, err)
	}
	return token, nil
}

// permission is an allow list as a JWT's: an empty list denies everything, as
// the server reads an empty allow list as no restriction.
func permission(subjects []string) jwt.Permission {
	if len(subjects) == 0 {
		return jwt.Permission{Deny: jwt.StringList{">"}}
	}
	return jwt.Permission{Allow: jwt.StringList(subjects)}
}

// IdentityName names id in its JWT: its role, then its name if it has one.
func IdentityName(id broker.Identity) string {
	if id.Name == "" {
		return string(id.Role)
	}
	return string(id.Role) + " " + id.Name
}

// SystemConnConfig is the broker.ConnConfig of the system user on urls with tls.
// Revoke needs a connection made with it.
func (a *Authority) SystemConnConfig(urls []string, tls broker.ClientTLS) broker.ConnConfig {
	return broker.ConnConfig{URLs: urls, Name: "chiffon orchestrator (system account)", CredsFile: a.systemCreds, TLS: tls}
}

// EnsureCreds writes path (0600) as the .creds file of a user: the JWT issue
// returns for the user's public key, then the user's seed. The key of an
// existing file at path is kept, and only the JWT issued anew; a missing file
// gets a new key. It returns the user's public key.
func EnsureCreds(path string, issue func(userPub string) (string, error)) (string, error) {
	kp, err := credsKey(path)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("creds %s: %w", path, err)
	}
	token, err := issue(pub)
	if err != nil {
		return "", err
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("creds %s: %w", path, err)
	}
	defer wipe(seed)
	text, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return "", fmt.Errorf("creds %s: cannot format", path)
	}
	defer wipe(text)
	if err := broker.WriteSecretFile(path, text); err != nil {
		return "", fmt.Errorf("creds: %w", err)
	}
	return pub, nil
}

// credsKey is the user key of the creds file path, or a new one when it does not
// exist.
func credsKey(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("creds %s: create a user key: %w", path, err)
		}
		return kp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creds: %w", err)
	}
	defer wipe(b)
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("creds: %s holds no user seed", path)
	}
	return kp, nil
}

// checkCreds checks that path holds a user JWT and a user seed.
func checkCreds(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	defer wipe(b)
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return fmt.Errorf("%s holds no user JWT", path)
	}
	if _, err := jwt.DecodeUserClaims(token); err != nil {
		return fmt.Errorf("%s holds no user JWT", path)
	}
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		return fmt.Errorf("%s holds no user seed", path)
	}
	kp.Wipe()
	return nil
}
