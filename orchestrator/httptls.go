package orchestrator

import (
	"crypto/tls"
	"fmt"
	"net"
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
// http.tls.key_file, http.listen or http.limits.*) in its error.
func (c HTTPConfig) Validate() error {
	switch {
	case c.TLS.CertFile != "" && c.TLS.KeyFile == "":
		return fmt.Errorf("config: http.tls.key_file: is required with http.tls.cert_file")
	case c.TLS.KeyFile != "" && c.TLS.CertFile == "":
		return fmt.Errorf("config: http.tls.cert_file: is required with http.tls.key_file")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if c.Listen != "" {
		return c.checkPlainBeyondLoopback(c.Listen)
	}
	return nil
}

// checkPlainBeyondLoopback refuses plain HTTP on addr when addr is reachable from
// other hosts, unless c says insecure: the bearer tokens and the dashboard's
// session cookie would cross the network in the clear.
func (c HTTPConfig) checkPlainBeyondLoopback(addr string) error {
	if c.TLS.Enabled() || c.Insecure || isLoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("config: http.listen: %s is reachable beyond loopback, and plain HTTP would send API tokens "+
		"and session cookies in the clear: set http.tls.cert_file and http.tls.key_file (chiffon init makes them "+
		"from the site CA), listen on 127.0.0.1, or set http.insecure: true if a proxy on this host ends TLS", addr)
}

// isLoopbackAddr reports whether a listen address (host:port) only accepts
// connections from this machine. An empty host means every address; names other
// than localhost count as reachable from elsewhere.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
