package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/site"
)

// TestInitConfigsDoNotNameTheExamples: a written orchestrator.yaml says how to run
// itself, not the example it came from.
func TestInitConfigsDoNotNameTheExamples(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "orchestrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "examples/") || !strings.HasPrefix(string(b), "# chiffon orchestrator --config orchestrator.yaml") {
		t.Fatalf("orchestrator.yaml starts:\n%s", string(b)[:min(200, len(b))])
	}
}

// TestInitServesTheAPIOverHTTPSBeyondLoopback: an API that listens beyond
// loopback gets a certificate from the site CA, so its token never crosses the
// network in the clear; one on loopback stays plain HTTP.
func TestInitServesTheAPIOverHTTPSBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		listen  string
		args    []string
		tls     bool
		wantSAN string
	}{
		{"127.0.0.1:8080", nil, false, ""},
		{"0.0.0.0:8080", []string{"--broker-host", "nas.lan"}, true, "nas.lan"},
		{"192.168.1.10:8080", nil, true, "192.168.1.10"},
		{"0.0.0.0:8080", []string{"--api-host", "orch.lan"}, true, "orch.lan"},
	} {
		dir := t.TempDir()
		args := append([]string{"init", "--dir", dir, "--agents", "code", "--listen", tc.listen}, tc.args...)
		if code, _, errOut := runCLI(t, "", args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
		orch, _ := os.ReadFile(filepath.Join(dir, "orchestrator.yaml"))
		certPath := filepath.Join(dir, "secrets", site.APICert)
		hasTLS := strings.Contains(string(orch), "cert_file: "+certPath)
		if hasTLS != tc.tls {
			t.Errorf("--listen %s %v: http.tls set %v, want %v:\n%s", tc.listen, tc.args, hasTLS, tc.tls, orch)
		}
		if !tc.tls {
			continue
		}
		b, err := os.ReadFile(certPath)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := cert.VerifyHostname(tc.wantSAN); err != nil {
			t.Errorf("--listen %s %v: API certificate: %v", tc.listen, tc.args, err)
		}
	}
}
