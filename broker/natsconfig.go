package broker

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nkeys"
)

// NATSConfig is the `nats` section of a daemon's config file: where the broker is,
// which subject prefix to use and the NATS identity the daemon connects as.
type NATSConfig struct {
	// URLs of the NATS servers; several give failover within a cluster.
	URLs []string `yaml:"urls"`
	// Prefix is the first token of every subject; "" means DefaultPrefix.
	Prefix string `yaml:"prefix"`
	// NKeyFile is a user NKey seed file (mode 0600) naming the daemon to a broker
	// whose config lists its public key; "" connects without an NKey.
	NKeyFile string `yaml:"nkey_file"`
	// CredsFile is a .creds file (user JWT and seed) for a nats-server run in
	// operator/JWT mode; exclusive with NKeyFile.
	CredsFile string `yaml:"creds_file"`
	// TLS says how to check the broker's certificate and, optionally, which client
	// certificate to show it.
	TLS ClientTLS `yaml:"tls"`
}

// ClientTLS is the client side of TLS to the broker. The zero value uses TLS only if
// the server asks for it, checking its certificate against the system's roots.
type ClientTLS struct {
	// CAFile is a PEM file of the CA certificates the server's certificate must
	// chain to; "" means the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate and its key for mutual TLS: set
	// both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server's certificate; "" means
	// the host of the URL dialled.
	ServerName string `yaml:"server_name"`
}

// Validate checks the identity and TLS settings: that the files exist, can be read
// and hold what they should. Each error names the YAML key, as "nats.nkey_file: ...";
// none holds a seed or a key. It does not check URLs, which each daemon requires.
func (c NATSConfig) Validate() error {
	return checkIdentity("nats.", c.NKeyFile, c.CredsFile, c.TLS)
}

// ConnConfig returns a ConnConfig that dials c.URLs as c's identity, named name; the
// caller adds handlers and tuning.
func (c NATSConfig) ConnConfig(name string) ConnConfig {
	return ConnConfig{
		URLs:      c.URLs,
		Name:      name,
		NKeyFile:  c.NKeyFile,
		CredsFile: c.CredsFile,
		TLS:       c.TLS,
	}
}

// isZero reports whether no TLS setting is given.
func (c ClientTLS) isZero() bool { return c == ClientTLS{} }

// checkIdentity checks an NKey or creds file and the TLS files; prefix is put before
// every key an error names.
func checkIdentity(prefix, nkeyFile, credsFile string, t ClientTLS) error {
	var errs []error
	if nkeyFile != "" && credsFile != "" {
		errs = append(errs, fmt.Errorf("%snkey_file and %screds_file: set only one", prefix, prefix))
	}
	if nkeyFile != "" {
		if err := checkSeedFile(nkeyFile); err != nil {
			errs = append(errs, fmt.Errorf("%snkey_file: %w", prefix, err))
		}
	}
	if credsFile != "" {
		if err := checkCredsFile(credsFile); err != nil {
			errs = append(errs, fmt.Errorf("%screds_file: %w", prefix, err))
		}
	}
	if _, err := t.config(prefix + "tls."); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkSeedFile checks that path holds a user NKey seed.
func checkSeedFile(path string) error {
	_, err := readUserSeedPublic(path)
	return err
}

// checkCredsFile checks that path holds a user JWT followed by a user seed, the
// layout `nsc` writes.
func checkCredsFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read: %w", err)
	}
	defer wipe(b)
	jwt, err := nkeys.ParseDecoratedJWT(b)
	if err != nil || strings.Count(jwt, ".") != 2 || strings.ContainsAny(jwt, " \n") {
		return fmt.Errorf("%s holds no user JWT", path)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return fmt.Errorf("%s holds no user NKey seed", path)
	}
	kp.Wipe()
	return nil
}

// wipe overwrites a buffer that held a secret.
func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
