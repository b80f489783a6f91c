package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
)

// TestOrchestratorRefusesPlainHTTPBeyondLoopback runs the real `chiffon
// orchestrator` with its API on every address and no TLS: it exits at once with an
// error naming http.listen, http.tls and http.insecure; with http.insecure: true
// in its config it serves, and warns.
func TestOrchestratorRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	t.Setenv("CHIFFON_LISTEN", "")
	srv := testnats.Start(t, broker.ServerConfig{})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(broker.NewToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, known before it serves
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	writeConfig := func(name string, insecure bool) string {
		path := filepath.Join(dir, name)
		body := fmt.Sprintf("nats: {urls: [%s]}\napi_token_file: %s\ndata_dir: %s\nhttp: {listen: '0.0.0.0:%d', insecure: %v}\n",
			srv.ClientURL(), tokenFile, filepath.Join(dir, "data-"+name), port, insecure)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// An orchestrator that starts after all runs until the deadline, and exits 0.
	refused := func(args ...string) (code int, stdout, stderr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, errOut := &lockedBuffer{}, &lockedBuffer{}
		code = run(ctx, append([]string{"orchestrator"}, args...), strings.NewReader(""), out, errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := refused("--config", writeConfig("plain.yaml", false))
	if code != 2 || out != "" {
		t.Fatalf("plain HTTP on 0.0.0.0: exit %d, want 2; stdout %q stderr %q", code, out, errOut)
	}
	for _, key := range []string{"http.listen", "http.tls", "http.insecure"} {
		if !strings.Contains(errOut, key) {
			t.Errorf("the refusal does not name %s: %s", key, errOut)
		}
	}
	// The --listen flag is checked as the file is.
	if code, _, errOut := refused("--nats", srv.ClientURL(), "--api-token-file", tokenFile,
		"--data-dir", filepath.Join(dir, "data-flag"), "--listen", ":0"); code != 2 || !strings.Contains(errOut, "http.insecure") {
		t.Fatalf("--listen :0: exit %d, want 2: %s", code, errOut)
	}

	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "")
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"orchestrator", "--config", writeConfig("insecure.yaml", true)}, strings.NewReader(""), io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if c := <-exit; c != 0 {
			t.Errorf("orchestrator with http.insecure exited %d: %s", c, stderr)
		}
	}()
	if got := nextNotify(t, conn); got != "READY=1" {
		t.Fatalf("with http.insecure: first message %q, want READY=1: %s", got, stderr)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/livez", port))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("with http.insecure the API is not served: %v %v\n%s", resp, err, stderr)
	}
	resp.Body.Close()
	if log := stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "plain HTTP beyond loopback") {
		t.Errorf("no warning of plain HTTP beyond loopback: %s", log)
	}
}
