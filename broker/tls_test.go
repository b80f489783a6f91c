package broker_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != want {
		t.Fatalf("%s: mode %v (%v), want %v", filepath.Base(path), st.Mode().Perm(), err, want)
	}
}

func aboutYears(d time.Duration, years int) bool {
	want := time.Duration(years) * 365 * 24 * time.Hour
	return d > want-48*time.Hour && d < want+48*time.Hour
}

func TestEnsureCAMakesAP256CAWithAPrivateKeyAndKeepsIt(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkMode(t, certPath, 0o644)
	checkMode(t, keyPath, 0o600)
	ca := readCert(t, certPath)
	pub, ok := ca.PublicKey.(*ecdsa.PublicKey)
	if !ca.IsCA || !ok || pub.Curve != elliptic.P256() || !aboutYears(time.Until(ca.NotAfter), 10) {
		t.Fatalf("CA: IsCA %v, key %T, until %v", ca.IsCA, ca.PublicKey, ca.NotAfter)
	}
	before, _ := os.ReadFile(certPath)
	if _, _, err := broker.EnsureCA(dir); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certPath); !bytes.Equal(before, after) {
		t.Fatal("an existing CA was replaced")
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if _, _, err := broker.EnsureCA(dir); err == nil {
		t.Fatal("a CA certificate without its key was accepted or replaced")
	}
}

func TestEnsureServerCertNamesItsHostsAndFollowsTheirChanges(t *testing.T) {
	dir := t.TempDir()
	caPath, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := broker.EnsureServerCert(dir, []string{"Broker.LAN", "10.0.0.5", "localhost", " "})
	if err != nil {
		t.Fatal(err)
	}
	checkMode(t, certPath, 0o644)
	checkMode(t, keyPath, 0o600)
	cert := readCert(t, certPath)
	if got := sans(cert); !slices.Equal(got, []string{"10.0.0.5", "127.0.0.1", "broker.lan", "localhost"}) {
		t.Fatalf("SANs %v", got)
	}
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || !aboutYears(time.Until(cert.NotAfter), 2) {
		t.Fatalf("usage %v, until %v", cert.ExtKeyUsage, cert.NotAfter)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, caPath))
	for _, name := range []string{"broker.lan", "10.0.0.5", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Fatalf("verify for %s: %v", name, err)
		}
	}

	before, _ := os.ReadFile(certPath)
	if _, _, err := broker.EnsureServerCert(dir, []string{"10.0.0.5", "broker.lan"}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certPath); !bytes.Equal(before, after) {
		t.Fatal("certificate for the same hosts was issued again")
	}
	if _, _, err := broker.EnsureServerCert(dir, []string{"broker.lan"}); err != nil {
		t.Fatal(err)
	}
	if got := sans(readCert(t, certPath)); !slices.Equal(got, []string{"127.0.0.1", "broker.lan", "localhost"}) {
		t.Fatalf("after a host was dropped, SANs %v", got)
	}
	if _, _, err := broker.EnsureServerCert(dir, []string{"nats://broker.lan:4222"}); err == nil {
		t.Fatal("a URL was taken as a host name")
	}
}

func TestServerCertIsIssuedAgainByANewCA(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := broker.EnsureCA(dir); err != nil {
		t.Fatal(err)
	}
	certPath, _, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "ca.pem"))
	os.Remove(filepath.Join(dir, "ca-key.pem"))
	caPath, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := broker.EnsureServerCert(dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := readCert(t, certPath).CheckSignatureFrom(readCert(t, caPath)); err != nil {
		t.Fatalf("server certificate not signed by the new CA: %v", err)
	}
}

func TestEnsureServerCertNeedsTheCA(t *testing.T) {
	if _, _, err := broker.EnsureServerCert(t.TempDir(), nil); err == nil {
		t.Fatal("issued a certificate without a CA")
	}
}

func TestEnsureClientCertIsForClientAuth(t *testing.T) {
	dir := t.TempDir()
	caPath, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := broker.EnsureClientCert(dir, "desk-1")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(certPath) != "client-desk-1.pem" || filepath.Base(keyPath) != "client-desk-1-key.pem" {
		t.Fatalf("paths %s %s", certPath, keyPath)
	}
	checkMode(t, keyPath, 0o600)
	cert := readCert(t, certPath)
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, caPath))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "desk-1" || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatalf("CN %q, usages %v", cert.Subject.CommonName, cert.ExtKeyUsage)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden"} {
		if _, _, err := broker.EnsureClientCert(dir, bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

// TestEnsureNodeCertServesAndDials: a cluster node's certificate names its hosts
// and serves both ends of a route: the node's listener (server authentication)
// and its dial to another node (client authentication). The server certificate
// stays for server authentication only.
func TestEnsureNodeCertServesAndDials(t *testing.T) {
	dir := t.TempDir()
	caPath, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := broker.EnsureNodeCert(dir, "broker-2", []string{"n2.lan"})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(certPath) != "broker-2.pem" || filepath.Base(keyPath) != "broker-2-key.pem" {
		t.Fatalf("paths %s %s", certPath, keyPath)
	}
	checkMode(t, keyPath, 0o600)
	cert := readCert(t, certPath)
	if got := sans(cert); !slices.Equal(got, []string{"127.0.0.1", "localhost", "n2.lan"}) {
		t.Fatalf("SANs %v", got)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, caPath))
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "n2.lan", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "n3.lan"}); err == nil {
		t.Error("node 2's certificate is valid for n3.lan")
	}
	server, _, err := broker.EnsureServerCert(dir, []string{"n2.lan"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readCert(t, server).ExtKeyUsage; !slices.Equal(got, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Fatalf("server certificate usages %v", got)
	}
}

func TestClientTLSConfig(t *testing.T) {
	dir := t.TempDir()
	caPath, _, _ := broker.EnsureCA(dir)
	certPath, keyPath, err := broker.EnsureClientCert(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := broker.ClientTLS{CAFile: caPath, CertFile: certPath, KeyFile: keyPath, ServerName: "nats.lan"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "nats.lan" || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("config %+v", cfg)
	}
	if cfg, err := (broker.ClientTLS{}).Config(); err != nil || cfg.RootCAs != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("zero value: %v %v", cfg, err)
	}
	for _, tc := range []struct {
		cfg  broker.ClientTLS
		want string
	}{
		{broker.ClientTLS{CertFile: certPath}, "tls.cert_file and tls.key_file"},
		{broker.ClientTLS{KeyFile: keyPath}, "tls.cert_file and tls.key_file"},
		{broker.ClientTLS{CAFile: keyPath}, "tls.ca_file"},
		{broker.ClientTLS{CAFile: filepath.Join(dir, "absent.pem")}, "tls.ca_file"},
		{broker.ClientTLS{CertFile: certPath, KeyFile: caPath}, "tls.cert_file, tls.key_file"},
	} {
		_, err := tc.cfg.Config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want it to name %s", tc.cfg, err, tc.want)
		}
	}
}

func sans(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}
