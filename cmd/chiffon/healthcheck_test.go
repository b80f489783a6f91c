package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"go.yaml.in/yaml/v3"
)

func TestHealthcheckFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	if err := os.WriteFile(path, []byte("now\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "healthcheck", "--file", path); code != 0 {
		t.Fatalf("fresh file: exit %d: %s", code, errOut)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "healthcheck", "--file", path, "--max-age", "30s"); code != 1 {
		t.Fatalf("stale file: exit %d, want 1: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "healthcheck", "--file", path+".absent"); code != 1 {
		t.Fatalf("missing file: exit %d, want 1", code)
	}
}

func TestHealthcheckURL(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if code, _, errOut := runCLI(t, "", "healthcheck", "--url", srv.URL); code != 0 {
		t.Fatalf("ready: exit %d: %s", code, errOut)
	}
	ready = false
	if code, _, errOut := runCLI(t, "", "healthcheck", "--url", srv.URL); code != 1 {
		t.Fatalf("not ready: exit %d, want 1: %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "healthcheck"); code != 2 {
		t.Fatalf("no flag: exit %d, want 2", code)
	}
}

func TestTokenNew(t *testing.T) {
	code, out, _ := runCLI(t, "", "token", "new")
	if code != 0 || !regexp.MustCompile(`^[A-Za-z0-9]{32}\n$`).MatchString(out) {
		t.Fatalf("token new: exit %d, %q", code, out)
	}
	path := filepath.Join(t.TempDir(), "a.token")
	if code, _, _ := runCLI(t, "", "token", "new", "--file", path); code != 0 {
		t.Fatal("token new --file failed")
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, info.Mode().Perm())
	}
}

// TestTokenNewWithARole writes the token and prints config lines that give it
// the role, without the token; a role that does not exist, or a role without a
// file, is refused.
func TestTokenNewWithARole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "viewer.token")
	code, out, errOut := runCLI(t, "", "token", "new", "--file", path, "--role", "viewer")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	tok, err := broker.ReadTokenFile(path)
	if err != nil || strings.Contains(out, tok) {
		t.Fatalf("token file: %v; the output shows the token: %v", err, strings.Contains(out, tok))
	}
	var cfg struct {
		APITokens []orchestrator.APITokenConfig `yaml:"api_tokens"`
	}
	_, snippet, _ := strings.Cut(out, "\n")
	if err := yaml.Unmarshal([]byte(snippet), &cfg); err != nil || len(cfg.APITokens) != 1 ||
		cfg.APITokens[0] != (orchestrator.APITokenConfig{TokenFile: path, Role: orchestrator.RoleViewer}) {
		t.Fatalf("config lines %q: %+v, %v", snippet, cfg, err)
	}
	for _, args := range [][]string{{"--file", path + "2", "--role", "admin"}, {"--role", "viewer"}} {
		if code, _, _ := runCLI(t, "", append([]string{"token", "new"}, args...)...); code != 2 {
			t.Errorf("token new %v: exit %d, want 2", args, code)
		}
	}
}
