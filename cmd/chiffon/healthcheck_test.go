package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
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
