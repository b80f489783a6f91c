package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nats-io/nkeys"
)

// EnsureNKeySeed makes path hold a user NKey seed and returns its public key ("U...").
// A missing file is created with a new seed and mode 0600 (its directory 0700 if
// missing too); an existing one is kept, and its mode forced to 0600. The seed is a
// secret: no error holds it.
func EnsureNKeySeed(path string) (publicKey string, err error) {
	pub, err := readUserSeedPublic(path)
	if err == nil {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("nkey seed: %w", err)
		}
		return pub, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("nkey seed: create: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	defer wipe(seed)
	if pub, err = kp.PublicKey(); err != nil {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	line := make([]byte, 0, len(seed)+1)
	line = append(append(line, seed...), '\n')
	defer wipe(line)
	if err := replaceFile(path, line, 0o600); err != nil {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	return pub, nil
}

// ReadNKeyPublic returns the public key ("U...") of the user NKey seed in path. The
// error names the file, never its content.
func ReadNKeyPublic(path string) (string, error) {
	pub, err := readUserSeedPublic(path)
	if err != nil {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	return pub, nil
}

// readUserSeedPublic reads a user seed file and returns its public key. An error
// wraps fs.ErrNotExist when the file is missing.
func readUserSeedPublic(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read: %w", err)
	}
	defer wipe(b)
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		// nkeys' errors are fixed strings; still, say it in our words.
		return "", fmt.Errorf("%s is not a user NKey seed file", path)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%s is not a user NKey seed file", path)
	}
	return pub, nil
}
