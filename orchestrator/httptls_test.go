package orchestrator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key into dir and
// returns their files and the certificate, which is its own CA.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, ca *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chiffon test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, ca
}

// serve runs o.Serve on a free port until the test ends and returns its address.
func serve(t *testing.T, o *orchestrator.Orchestrator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestServeHTTPSWithTheConfiguredCertificate(t *testing.T) {
	e := newEnv(t)
	certFile, keyFile, ca := selfSigned(t, t.TempDir())
	e.cfg.HTTP.TLS = orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}
	o := e.open()
	url := "https://" + serve(t, o) + "/readyz"

	get := func(hc *http.Client) (int, error) {
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if status, err := get(trusting); err != nil || status != http.StatusOK {
		t.Fatalf("with the CA: %d %v", status, err)
	}
	// Without the CA (the system's roots only) the certificate is refused.
	var unknown x509.UnknownAuthorityError
	if _, err := get(&http.Client{Transport: &http.Transport{}}); !errors.As(err, &unknown) {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
}

func TestHTTPTLSConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent.pem")
	cases := []struct {
		name            string
		tls             orchestrator.TLSConfig
		validate, serve string // a key the error names; "" for no error
	}{
		{"neither", orchestrator.TLSConfig{}, "", ""},
		{"both", orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}, "", ""},
		{"cert without key", orchestrator.TLSConfig{CertFile: certFile}, "http.tls.key_file", "http.tls.key_file"},
		{"key without cert", orchestrator.TLSConfig{KeyFile: keyFile}, "http.tls.cert_file", "http.tls.cert_file"},
		{"absent cert", orchestrator.TLSConfig{CertFile: absent, KeyFile: keyFile}, "", "http.tls.cert_file"},
		{"absent key", orchestrator.TLSConfig{CertFile: certFile, KeyFile: absent}, "", "http.tls.key_file"},
		{"key that is not PEM", orchestrator.TLSConfig{CertFile: certFile, KeyFile: garbage}, "", "http.tls.key_file"},
	}
	e := newEnv(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := orchestrator.HTTPConfig{TLS: tc.tls}.Validate()
			if tc.validate == "" && err != nil || tc.validate != "" && (err == nil || !strings.Contains(err.Error(), tc.validate)) {
				t.Fatalf("Validate: %v, want an error naming %q", err, tc.validate)
			}
			cfg := e.cfg
			cfg.DataDir = t.TempDir()
			cfg.HTTP.TLS = tc.tls
			o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: slog.New(slog.DiscardHandler)})
			if tc.validate != "" {
				// Open validates the config: a half-set pair stops it there.
				if err == nil || !strings.Contains(err.Error(), tc.validate) {
					t.Fatalf("Open: %v, want an error naming %q", err, tc.validate)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // a server that starts stops at once
			err = o.Serve(ctx, ln)
			if tc.serve == "" && err != nil || tc.serve != "" && (err == nil || !strings.Contains(err.Error(), tc.serve)) {
				t.Fatalf("Serve: %v, want an error naming %q", err, tc.serve)
			}
		})
	}
}

// TestPlainHTTPBeyondLoopbackNeedsTLSOrInsecure: an API listening where other hosts
// reach it must serve HTTPS, or say http.insecure; the refusal names the keys, at
// Validate for http.listen and at Serve for the listener an embedding program gives.
func TestPlainHTTPBeyondLoopbackNeedsTLSOrInsecure(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	withTLS := orchestrator.TLSConfig{CertFile: certFile, KeyFile: keyFile}
	cases := []struct {
		listen   string
		tls      orchestrator.TLSConfig
		insecure bool
		refused  bool
	}{
		{"127.0.0.1:8080", orchestrator.TLSConfig{}, false, false},
		{"[::1]:8080", orchestrator.TLSConfig{}, false, false},
		{"localhost:8080", orchestrator.TLSConfig{}, false, false},
		{"", orchestrator.TLSConfig{}, false, false}, // the API off
		{"0.0.0.0:8080", orchestrator.TLSConfig{}, false, true},
		{"[::]:8080", orchestrator.TLSConfig{}, false, true},
		{":8080", orchestrator.TLSConfig{}, false, true},
		{"192.168.1.5:8080", orchestrator.TLSConfig{}, false, true},
		{"nas.lan:8080", orchestrator.TLSConfig{}, false, true},
		{"0.0.0.0:8080", withTLS, false, false},
		{"0.0.0.0:8080", orchestrator.TLSConfig{}, true, false},
	}
	for _, tc := range cases {
		err := orchestrator.HTTPConfig{Listen: tc.listen, TLS: tc.tls, Insecure: tc.insecure}.Validate()
		if !tc.refused {
			if err != nil {
				t.Errorf("listen %q tls %v insecure %v: %v", tc.listen, tc.tls.Enabled(), tc.insecure, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("listen %q over plain HTTP: no error", tc.listen)
			continue
		}
		for _, key := range []string{"http.listen", "http.tls", "http.insecure"} {
			if !strings.Contains(err.Error(), key) {
				t.Errorf("listen %q: %v: does not name %s", tc.listen, err, key)
			}
		}
	}

	e := newEnv(t)
	for _, tc := range []struct {
		name     string
		tls      orchestrator.TLSConfig
		insecure bool
		refused  bool
	}{{"plain", orchestrator.TLSConfig{}, false, true}, {"insecure", orchestrator.TLSConfig{}, true, false}, {"tls", withTLS, false, false}} {
		t.Run("Serve "+tc.name, func(t *testing.T) {
			cfg := e.cfg
			cfg.DataDir = t.TempDir()
			cfg.HTTP = orchestrator.HTTPConfig{TLS: tc.tls, Insecure: tc.insecure}
			o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			ln, err := net.Listen("tcp", "0.0.0.0:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // a server that starts stops at once
			err = o.Serve(ctx, ln)
			if tc.refused != (err != nil) || tc.refused && !strings.Contains(err.Error(), "http.insecure") {
				t.Fatalf("Serve on %s: %v, refused want %v", ln.Addr(), err, tc.refused)
			}
		})
	}
}
