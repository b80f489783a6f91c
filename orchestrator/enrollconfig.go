package orchestrator

// EnrollConfig is the enroll section of an orchestrator's config, which
// `chiffon init --operator` writes: the files of a site in NATS operator mode
// (package broker/natsjwt) with which identities are enrolled and revoked while
// the broker runs. Every field is "" on a site of NKey users.
type EnrollConfig struct {
	// AccountSigningKeyFile is the seed of the site account's signing key
	// (0600), which signs the user JWTs.
	AccountSigningKeyFile string `yaml:"account_signing_key_file"`
	// OperatorSigningKeyFile is the seed of the operator's signing key (0600),
	// which signs the account's JWT with its revocations.
	OperatorSigningKeyFile string `yaml:"operator_signing_key_file"`
	// AccountPublicKey is the site account's public key ("A...").
	AccountPublicKey string `yaml:"account_public_key"`
	// SystemCredsFile is the .creds file of the system account's user (0600),
	// which pushes the account's JWT to the servers.
	SystemCredsFile string `yaml:"system_creds_file"`
}
