// Package natsjwt runs a site's broker in NATS operator mode: it makes the
// site's operator, its system account and the account every identity of the
// site belongs to (EnsureSite), issues user JWTs with the rights of
// broker.Subjects.Permissions and writes them as .creds files, and revokes a
// user while the servers run (Authority.Revoke), pushing the account's JWT to
// the servers' resolver.
//
// Seeds rest in files of mode 0600 in a directory of mode 0700; no error of this
// package holds a seed or a JWT.
package natsjwt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nkeys"
)

// key is a key pair with its public key.
type key struct {
	kp  nkeys.KeyPair
	pub string
}

// ensureSeed returns the key whose seed is in path, making it (a new key of
// kind prefix) when the file does not exist. An existing file is kept and its
// mode forced to 0600.
func ensureSeed(path string, prefix nkeys.PrefixByte) (key, error) {
	k, err := loadSeed(path, prefix)
	if err == nil {
		if err := os.Chmod(path, 0o600); err != nil {
			return key{}, fmt.Errorf("nkey seed: %w", err)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return key{}, err
	}
	kp, err := nkeys.CreatePair(prefix)
	if err != nil {
		return key{}, fmt.Errorf("nkey seed %s: create: %w", path, err)
	}
	// Seed returns the pair's own buffer: wiping it would spoil the pair.
	seed, err := kp.Seed()
	if err != nil {
		return key{}, fmt.Errorf("nkey seed %s: %w", path, err)
	}
	line := append(append(make([]byte, 0, len(seed)+1), seed...), '\n')
	defer wipe(line)
	if err := broker.WriteSecretFile(path, line); err != nil {
		return key{}, fmt.Errorf("nkey seed: %w", err)
	}
	return pairKey(kp, path, prefix)
}

// loadSeed reads the seed of a key of kind prefix from path. An error wraps
// fs.ErrNotExist when the file is missing, and never holds the file's content.
func loadSeed(path string, prefix nkeys.PrefixByte) (key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return key{}, fmt.Errorf("nkey seed: %w", err)
	}
	defer wipe(b)
	kp, err := nkeys.FromSeed(bytes.TrimSpace(b))
	if err != nil {
		return key{}, fmt.Errorf("nkey seed: %s holds no NKey seed", path)
	}
	return pairKey(kp, path, prefix)
}

// pairKey is kp as a key, which must be of kind prefix; path names its file for
// errors.
func pairKey(kp nkeys.KeyPair, path string, prefix nkeys.PrefixByte) (key, error) {
	pub, err := kp.PublicKey()
	if err != nil || !isKind(pub, prefix) {
		return key{}, fmt.Errorf("nkey seed: %s holds no %s seed", path, kindName(prefix))
	}
	return key{kp: kp, pub: pub}, nil
}

// isKind reports whether pub is a public key of kind prefix.
func isKind(pub string, prefix nkeys.PrefixByte) bool {
	switch prefix {
	case nkeys.PrefixByteOperator:
		return nkeys.IsValidPublicOperatorKey(pub)
	case nkeys.PrefixByteAccount:
		return nkeys.IsValidPublicAccountKey(pub)
	case nkeys.PrefixByteUser:
		return nkeys.IsValidPublicUserKey(pub)
	}
	return false
}

// kindName names a kind of key for errors.
func kindName(prefix nkeys.PrefixByte) string {
	switch prefix {
	case nkeys.PrefixByteOperator:
		return "operator"
	case nkeys.PrefixByteAccount:
		return "account"
	case nkeys.PrefixByteUser:
		return "user"
	}
	return "unknown"
}

// wipe overwrites a buffer that held a secret.
func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
