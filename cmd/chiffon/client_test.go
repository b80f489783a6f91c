package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientTrustsTheCAOfAPICAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/agents" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("[]"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "api.token")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"agents", "--json", "--server", srv.URL, "--api-token-file", tokenFile}

	cases := []struct {
		name      string
		flag, env string // --api-ca-file and CHIFFON_API_CA_FILE
		code      int
		errText   string
	}{
		{"flag", caFile, "", 0, ""},
		{"environment", "", caFile, 0, ""},
		{"no CA", "", "", 1, "certificate"},
		{"a file without a certificate", tokenFile, "", 1, "--api-ca-file: " + tokenFile + " holds no PEM certificate"},
		{"an absent file", filepath.Join(dir, "absent.pem"), "", 1, "--api-ca-file: open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CHIFFON_API_CA_FILE", tc.env)
			a := args
			if tc.flag != "" {
				a = append(a[:len(a):len(a)], "--api-ca-file", tc.flag)
			}
			code, out, errOut := runCLI(t, "", a...)
			if code != tc.code || !strings.Contains(errOut, tc.errText) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, errOut, tc.code, tc.errText)
			}
			if code == 0 && strings.TrimSpace(out) != "[]" {
				t.Fatalf("stdout %q", out)
			}
		})
	}
}
