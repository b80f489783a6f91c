package broker

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// File names in a site's TLS directory.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
)

// Validity of what the site CA issues. A leaf is issued again by its Ensure function
// once less than renewBefore of it is left.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// EnsureCA makes dir hold a site CA: ca.pem (mode 0644) and ca-key.pem (0600), an
// ECDSA P-256 key valid 10 years; dir is created with mode 0700 if missing. An
// existing pair is kept; half a pair is an error rather than replaced, as
// certificates may already chain to it.
func EnsureCA(dir string) (caCertPath, caKeyPath string, err error) {
	caCertPath, caKeyPath = filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	_, certErr := os.Stat(caCertPath)
	_, keyErr := os.Stat(caKeyPath)
	switch {
	case certErr == nil && keyErr == nil:
		if _, _, err := loadCA(dir); err != nil {
			return "", "", err
		}
		return caCertPath, caKeyPath, nil
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
	case certErr == nil || keyErr == nil:
		return "", "", fmt.Errorf("tls: %s holds only one of %s and %s", dir, caCertFile, caKeyFile)
	default:
		return "", "", fmt.Errorf("tls: CA: %w", errors.Join(certErr, keyErr))
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "Chiffon site CA", Organization: []string{"Chiffon"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	if err := issue(caCertPath, caKeyPath, tmpl, caValidity, nil, nil); err != nil {
		return "", "", fmt.Errorf("tls: CA: %w", err)
	}
	return caCertPath, caKeyPath, nil
}

// EnsureServerCert makes dir hold server.pem and server-key.pem, a broker certificate
// signed by the CA in dir (see EnsureCA) for hosts: IP addresses become IP SANs and
// names DNS SANs; localhost and 127.0.0.1 are always included. It is valid 2 years
// for server auth. An existing certificate is kept unless its SANs differ from hosts,
// another CA signed it or it expires within 30 days.
func EnsureServerCert(dir string, hosts []string) (certPath, keyPath string, err error) {
	return EnsureNamedServerCert(dir, "server", hosts)
}

// EnsureNamedServerCert is EnsureServerCert for another server of the site, such as
// the orchestrator's HTTP API: its files are <name>.pem and <name>-key.pem.
func EnsureNamedServerCert(dir, name string, hosts []string) (certPath, keyPath string, err error) {
	return ensureHostCert(dir, name, hosts, x509.ExtKeyUsageServerAuth)
}

// EnsureNodeCert is EnsureNamedServerCert for a node of a NATS cluster: the
// certificate is valid for client authentication too, since a node dials the
// other nodes' route ports and shows it to them.
func EnsureNodeCert(dir, name string, hosts []string) (certPath, keyPath string, err error) {
	return ensureHostCert(dir, name, hosts, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// ensureHostCert makes dir hold <name>.pem and <name>-key.pem for hosts, with
// usages (see EnsureServerCert).
func ensureHostCert(dir, name string, hosts []string, usages ...x509.ExtKeyUsage) (certPath, keyPath string, err error) {
	if !clientNameRE.MatchString(name) {
		return "", "", fmt.Errorf("tls: server certificate name %q: use letters, digits, '.', '_' and '-'", name)
	}
	dns, ips, err := parseHosts(append([]string{"localhost", "127.0.0.1"}, hosts...))
	if err != nil {
		return "", "", fmt.Errorf("tls: server certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "Chiffon " + name, Organization: []string{"Chiffon"}},
		DNSNames:    dns,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usages,
	}
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := ensureLeaf(dir, certPath, keyPath, tmpl); err != nil {
		return "", "", fmt.Errorf("tls: server certificate: %w", err)
	}
	return certPath, keyPath, nil
}

var clientNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// EnsureClientCert makes dir hold client-<name>.pem and client-<name>-key.pem, a
// client certificate for mutual TLS with common name name, signed by the CA in dir
// and valid 2 years. An existing one is kept unless another CA signed it or it
// expires within 30 days.
func EnsureClientCert(dir, name string) (certPath, keyPath string, err error) {
	if !clientNameRE.MatchString(name) {
		return "", "", fmt.Errorf("tls: client certificate name %q: use letters, digits, '.', '_' and '-'", name)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"Chiffon"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPath = filepath.Join(dir, "client-"+name+".pem")
	keyPath = filepath.Join(dir, "client-"+name+"-key.pem")
	if err := ensureLeaf(dir, certPath, keyPath, tmpl); err != nil {
		return "", "", fmt.Errorf("tls: client certificate %s: %w", name, err)
	}
	return certPath, keyPath, nil
}

// Config builds the client tls.Config: RootCAs from CAFile, the client certificate
// if CertFile and KeyFile are set, ServerName, and TLS 1.2 at least. Errors name the
// YAML key under "tls.".
func (c ClientTLS) Config() (*tls.Config, error) { return c.config("tls.") }

func (c ClientTLS) config(prefix string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	var errs []error
	if c.CAFile != "" {
		pool, err := LoadCertPool(c.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%sca_file: %w", prefix, err))
		}
		cfg.RootCAs = pool
	}
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		errs = append(errs, fmt.Errorf("%scert_file and %skey_file: set both or neither", prefix, prefix))
	case c.CertFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%scert_file, %skey_file: %w", prefix, prefix, err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadCertPool reads a PEM file of CA certificates, which must hold at least one.
func LoadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // it names the file
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// parseHosts splits hosts into sorted, deduplicated DNS names and IP addresses.
func parseHosts(hosts []string) (dns []string, ips []net.IP, err error) {
	seenIP := map[string]bool{}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !seenIP[ip.String()] {
				seenIP[ip.String()] = true
				ips = append(ips, ip)
			}
			continue
		}
		if strings.ContainsAny(h, ":/ \t\n@") {
			return nil, nil, fmt.Errorf("host %q is neither a DNS name nor an IP address", h)
		}
		dns = append(dns, strings.ToLower(h))
	}
	slices.Sort(dns)
	dns = slices.Compact(dns)
	slices.SortFunc(ips, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
	return dns, ips, nil
}

// ensureLeaf keeps the certificate at certPath if it still fits tmpl, and otherwise
// issues a new one from the CA in dir.
func ensureLeaf(dir, certPath, keyPath string, tmpl *x509.Certificate) error {
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return err
	}
	if cur, _, err := loadPair(certPath, keyPath); err == nil && leafFits(cur, tmpl, caCert) {
		return nil
	}
	return issue(certPath, keyPath, tmpl, leafValidity, caCert, caKey)
}

// leafFits reports whether cur was signed by ca, is not near its end, and has the
// subject, SANs and usages tmpl asks for.
func leafFits(cur, tmpl, ca *x509.Certificate) bool {
	if cur.CheckSignatureFrom(ca) != nil || time.Until(cur.NotAfter) < renewBefore {
		return false
	}
	ipStrings := func(ips []net.IP) []string {
		out := make([]string, len(ips))
		for i, ip := range ips {
			out[i] = ip.String()
		}
		slices.Sort(out)
		return out
	}
	return cur.Subject.CommonName == tmpl.Subject.CommonName &&
		slices.Equal(slices.Sorted(slices.Values(cur.DNSNames)), tmpl.DNSNames) &&
		slices.Equal(ipStrings(cur.IPAddresses), ipStrings(tmpl.IPAddresses)) &&
		slices.Equal(cur.ExtKeyUsage, tmpl.ExtKeyUsage)
}

// loadCA loads the CA in dir and checks that it is one.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	cert, key, err := loadPair(filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("site CA in %s: %w", dir, err)
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("site CA in %s: %s is not a CA certificate", dir, caCertFile)
	}
	return cert, key, nil
}

// loadPair loads a certificate and its matching private key.
func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: key cannot sign", keyPath)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", certPath, err)
		}
	}
	return pair.Leaf, key, nil
}

// issue creates a P-256 key and a certificate for it from tmpl, valid from an hour
// ago (for skewed clocks) for validity, signed by parent or, when parent is nil,
// self-signed; it writes the certificate (0644) and key (0600), replacing old ones.
func issue(certPath, keyPath string, tmpl *x509.Certificate, validity time.Duration, parent *x509.Certificate, parentKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	t := *tmpl
	t.SerialNumber = serial
	t.NotBefore = time.Now().Add(-time.Hour)
	t.NotAfter = time.Now().Add(validity)
	if parent == nil {
		parent, parentKey = &t, key
	}
	der, err := x509.CreateCertificate(rand.Reader, &t, parent, key.Public(), parentKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	defer wipe(keyPEM)
	if err := replaceFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return replaceFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// WriteSecretFile writes data to path with mode 0600, as replaceFile does: a
// reader sees the old content or the new, and nobody else ever reads it.
func WriteSecretFile(path string, data []byte) error { return replaceFile(path, data, 0o600) }

// replaceFile writes data to path through a temporary file renamed over it, so
// readers see the old content or the new, and a secret is never readable by others.
// Missing directories are created with mode 0700.
func replaceFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
