package orchestrator

import (
	"crypto/tls"
	"fmt"
	"os"
)

// TLSConfig names the files of the API's HTTPS certificate. Both are set, or neither.
type TLSConfig struct {
	// CertFile holds the PEM certificate chain, the server's certificate first.
	CertFile string `yaml:"cert_file"`
	// KeyFile holds the PEM private key of the certificate.
	KeyFile string `yaml:"key_file"`
}

// Enabled reports whether c asks for HTTPS.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate checks c and names the offending key (http.tls.cert_file,
// http.tls.key_file, http.limits.*) in its error.
func (c HTTPConfig) Validate() error {
	switch {
	case c.TLS.CertFile != "" && c.TLS.KeyFile == "":
		return fmt.Errorf("config: http.tls.key_file: is required with http.tls.cert_file")
	case c.TLS.KeyFile != "" && c.TLS.CertFile == "":
		return fmt.Errorf("config: http.tls.cert_file: is required with http.tls.key_file")
	}
	return c.Limits.validate()
}

// serverTLS loads the certificate c names, so that a bad file stops the server at
// start with the key at fault; it returns nil for plain HTTP.
func (c HTTPConfig) serverTLS() (*tls.Config, error) {
	if err := c.Validate(); err != nil || !c.TLS.Enabled() {
		return nil, err
	}
	// tls.LoadX509KeyPair, with errors that name the key.
	certPEM, err := os.ReadFile(c.TLS.CertFile)
	if err != nil {
		return nil, fmt.Errorf("config: http.tls.cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(c.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("config: http.tls.key_file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("config: http.tls.cert_file %s with http.tls.key_file %s: %w", c.TLS.CertFile, c.TLS.KeyFile, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}
