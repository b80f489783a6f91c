package orchestrator

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// EnrollConfig lets the orchestrator enroll new agent hosts (chiffon enroll,
// chiffon agent join) and revoke them. It needs a site whose broker runs in
// NATS operator mode (chiffon init --operator writes this section): the
// orchestrator signs each joined host's NATS identity with the account's
// signing key, and revokes one by signing the account again with the
// operator's signing key and pushing it to the brokers as the system user.
type EnrollConfig struct {
	// AccountSigningKeyFile is the seed of the site account's signing key.
	AccountSigningKeyFile string `yaml:"account_signing_key_file"`
	// OperatorSigningKeyFile is the seed of the operator's signing key.
	OperatorSigningKeyFile string `yaml:"operator_signing_key_file"`
	// AccountPublicKey is the site account's public key ("A...").
	AccountPublicKey string `yaml:"account_public_key"`
	// SystemCredsFile is the .creds file of the system account's user.
	SystemCredsFile string `yaml:"system_creds_file"`
	// NATSURLs are the broker URLs a joined host is given; empty means
	// nats.urls. List the names the hosts reach the broker at (a wss:// URL
	// for a host beyond the LAN).
	NATSURLs []string `yaml:"nats_urls"`
	// CAFile is the site CA a joined host is given and the API serves with
	// its certificate, so that a host can check it against the fingerprint
	// it was told; empty means nats.tls.ca_file.
	CAFile string `yaml:"ca_file"`
}

// Enabled reports whether the section is set.
func (c EnrollConfig) Enabled() bool {
	return c.AccountSigningKeyFile != "" || c.OperatorSigningKeyFile != "" || c.AccountPublicKey != "" || c.SystemCredsFile != ""
}

// validate checks a set section, naming the key at fault.
func (c EnrollConfig) validate(caFile string) error {
	if !c.Enabled() {
		return nil
	}
	for key, v := range map[string]string{"account_signing_key_file": c.AccountSigningKeyFile,
		"operator_signing_key_file": c.OperatorSigningKeyFile, "account_public_key": c.AccountPublicKey,
		"system_creds_file": c.SystemCredsFile} {
		if v == "" {
			return fmt.Errorf("config: enroll.%s: is required to enroll hosts", key)
		}
	}
	if c.CAFile == "" && caFile == "" {
		return fmt.Errorf("config: enroll.ca_file: is required when nats.tls.ca_file is not set: a joining host must be given the site CA")
	}
	return nil
}

// ca reads the CA a joined host is given: its PEM, and the DER of its
// certificate, which must be one.
func (c EnrollConfig) ca(natsCA string) (pemBytes, der []byte, err error) {
	path, key := c.CAFile, "enroll.ca_file"
	if path == "" {
		path, key = natsCA, "nats.tls.ca_file"
	}
	pemBytes, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %s: %w", key, err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("config: %s: no PEM certificate", key)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, nil, fmt.Errorf("config: %s: %w", key, err)
	}
	return pemBytes, block.Bytes, nil
}
