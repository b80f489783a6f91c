package natsjwt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Names of a site's operator-mode files in its secrets directory. The seeds
// marked "no host" sign only what EnsureSite signs: keep them off every host,
// like the CA's key.
const (
	// OperatorSeed is the operator's identity key (no host): it signs the
	// operator's JWT.
	OperatorSeed = "operator.nk"
	// OperatorSignerSeed is the operator's signing key (the orchestrator's
	// host): it signs the accounts, and so the account's revocations.
	OperatorSignerSeed = "operator-signer.nk"
	// SystemAccountSeed is the system account's identity key (no host): it
	// signs the system account's user.
	SystemAccountSeed = "system-account.nk"
	// AccountSeed is the site account's identity key (no host).
	AccountSeed = "account.nk"
	// AccountSignerSeed is the site account's signing key (the orchestrator's
	// host): it signs the users.
	AccountSignerSeed = "account-signer.nk"
	// SystemCreds is the system account user's .creds (the orchestrator's
	// host): it pushes the site account's JWT to the servers.
	SystemCreds = "orchestrator-sys.creds"
	// OperatorJWTFile keeps the operator's JWT that broker.conf carries, so
	// that writing it again gives the same one.
	OperatorJWTFile = "operator.jwt"
	// SystemAccountJWTFile keeps the system account's JWT, as OperatorJWTFile.
	SystemAccountJWTFile = "system-account.jwt"
	// AccountJWTFile keeps the site account's JWT that broker.conf preloads:
	// one signed anew would be newer than the revocations the servers hold, and
	// replace them at their next restart.
	AccountJWTFile = "account.jwt"
)

// AccountName is the name of the account every identity of a site belongs to.
const AccountName = "CHIFFON"

// Site is a site's operator, system account and account, as EnsureSite made or
// kept them.
type Site struct {
	// Authority names the files an orchestrator enrolls and revokes with.
	Authority AuthorityFiles
	// OperatorJWT is the operator's JWT, which the servers trust.
	OperatorJWT string
	// SystemAccount is the system account's public key.
	SystemAccount string
	// SystemAccountJWT and AccountJWT are the accounts' JWTs as the servers
	// preload them.
	SystemAccountJWT, AccountJWT string
}

// siteKeys are the keys EnsureSite makes or keeps.
type siteKeys struct {
	operator, operatorSigner, system, account, accountSigner key
}

// EnsureSite makes (or keeps) in dir (0700) a site's operator (an identity key
// and a signing key), its system account with one user for the orchestrator
// (SystemCreds), and the account AccountName (an identity key and a signing
// key) with JetStream unlimited. Existing seeds and the system user's key are
// kept; an existing JWT is kept while it still says what this build would write.
func EnsureSite(dir string) (*Site, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	var k siteKeys
	for _, s := range []struct {
		dst    *key
		file   string
		prefix nkeys.PrefixByte
	}{
		{&k.operator, OperatorSeed, nkeys.PrefixByteOperator},
		{&k.operatorSigner, OperatorSignerSeed, nkeys.PrefixByteOperator},
		{&k.system, SystemAccountSeed, nkeys.PrefixByteAccount},
		{&k.account, AccountSeed, nkeys.PrefixByteAccount},
		{&k.accountSigner, AccountSignerSeed, nkeys.PrefixByteAccount},
	} {
		var err error
		if *s.dst, err = ensureSeed(filepath.Join(dir, s.file), s.prefix); err != nil {
			return nil, err
		}
	}
	site := &Site{
		Authority: AuthorityFiles{
			AccountSigningKeyFile:  filepath.Join(dir, AccountSignerSeed),
			OperatorSigningKeyFile: filepath.Join(dir, OperatorSignerSeed),
			AccountPublicKey:       k.account.pub,
			SystemCredsFile:        filepath.Join(dir, SystemCreds),
		},
		SystemAccount: k.system.pub,
	}
	var err error
	if site.OperatorJWT, err = ensureJWT(filepath.Join(dir, OperatorJWTFile), k.operatorClaims); err != nil {
		return nil, err
	}
	if site.SystemAccountJWT, err = ensureJWT(filepath.Join(dir, SystemAccountJWTFile), k.systemClaims); err != nil {
		return nil, err
	}
	if site.AccountJWT, err = ensureJWT(filepath.Join(dir, AccountJWTFile), k.accountClaims); err != nil {
		return nil, err
	}
	if _, err := EnsureCreds(site.Authority.SystemCredsFile, k.systemUser); err != nil {
		return nil, err
	}
	return site, nil
}

// ServerOperator is the operator block of the site's broker config, the
// server keeping the account JWTs it is given in resolverDir.
func (s *Site) ServerOperator(resolverDir string) *broker.OperatorFile {
	return &broker.OperatorFile{
		OperatorJWT: s.OperatorJWT, SystemAccount: s.SystemAccount, ResolverDir: resolverDir,
		Preload: map[string]string{s.SystemAccount: s.SystemAccountJWT, s.Authority.AccountPublicKey: s.AccountJWT},
	}
}

// operatorClaims returns the operator's JWT as an existing one (old, "" if
// none) if it still fits, or else a new one.
func (k siteKeys) operatorClaims(old string) (string, error) {
	if c, err := jwt.DecodeOperatorClaims(old); err == nil && c.Subject == k.operator.pub && c.Issuer == k.operator.pub &&
		c.SigningKeys.Contains(k.operatorSigner.pub) && c.SystemAccount == k.system.pub {
		return old, nil
	}
	c := jwt.NewOperatorClaims(k.operator.pub)
	c.Name = "chiffon"
	c.SigningKeys.Add(k.operatorSigner.pub)
	c.SystemAccount = k.system.pub
	return c.Encode(k.operator.kp)
}

// systemClaims returns the system account's JWT: old if it still fits, or a
// new one signed by the operator's signing key.
func (k siteKeys) systemClaims(old string) (string, error) {
	if c, err := jwt.DecodeAccountClaims(old); err == nil && c.Subject == k.system.pub && c.Issuer == k.operatorSigner.pub {
		return old, nil
	}
	c := jwt.NewAccountClaims(k.system.pub)
	c.Name = "SYS"
	return c.Encode(k.operatorSigner.kp)
}

// accountClaims returns the site account's JWT: old if it still fits, or a new
// one signed by the operator's signing key, with the account's signing key and
// JetStream unlimited (the orchestrators' task store).
func (k siteKeys) accountClaims(old string) (string, error) {
	if c, err := jwt.DecodeAccountClaims(old); err == nil && c.Subject == k.account.pub && c.Issuer == k.operatorSigner.pub &&
		c.Name == AccountName && c.SigningKeys.Contains(k.accountSigner.pub) && c.Limits.JetStreamLimits == unlimitedJetStream {
		return old, nil
	}
	c := jwt.NewAccountClaims(k.account.pub)
	c.Name = AccountName
	c.SigningKeys.Add(k.accountSigner.pub)
	c.Limits.JetStreamLimits = unlimitedJetStream
	return c.Encode(k.operatorSigner.kp)
}

// unlimitedJetStream enables JetStream in an account with no limit.
var unlimitedJetStream = jwt.JetStreamLimits{MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit}

// systemUser is the JWT of the system account's user userPub: it may only look
// up and update the site account's JWT, and read its own inbox.
func (k siteKeys) systemUser(userPub string) (string, error) {
	c := jwt.NewUserClaims(userPub)
	c.Name = "orchestrator (system account)"
	c.Pub.Allow = jwt.StringList{claimsSubject(k.account.pub, "LOOKUP"), claimsSubject(k.account.pub, "UPDATE")}
	c.Sub.Allow = jwt.StringList{"_INBOX.>"}
	return c.Encode(k.system.kp)
}

// claimsSubject is the system subject that looks up (op "LOOKUP") or updates
// ("UPDATE") the JWT of account.
func claimsSubject(account, op string) string {
	return "$SYS.REQ.ACCOUNT." + account + ".CLAIMS." + op
}

// ensureJWT keeps the JWT in path when sign returns it as it is, or writes the
// one sign returns instead (0600). sign gets "" when the file does not exist.
func ensureJWT(path string, sign func(old string) (string, error)) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("jwt: %w", err)
	}
	old := string(b)
	token, err := sign(old)
	if err != nil {
		return "", fmt.Errorf("jwt %s: %w", filepath.Base(path), err)
	}
	if token == old {
		return token, nil
	}
	if err := broker.WriteSecretFile(path, []byte(token)); err != nil {
		return "", fmt.Errorf("jwt: %w", err)
	}
	return token, nil
}
