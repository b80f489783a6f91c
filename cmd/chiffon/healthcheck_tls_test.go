package main

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
)

// TestHealthcheckURLTrustsTheSiteCA: the orchestrator's API served with the site's
// certificate passes a healthcheck given the site CA, and fails one without it.
func TestHealthcheckURLTrustsTheSiteCA(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := broker.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := broker.EnsureNamedServerCert(dir, "api", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	if code, _, errOut := runCLI(t, "", "healthcheck", "--url", srv.URL, "--api-ca-file", ca); code != 0 {
		t.Fatalf("with the site CA: exit %d: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "healthcheck", "--url", srv.URL); code != 1 {
		t.Fatalf("without the site CA: exit %d, want 1", code)
	}
}
