package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// notifySocket listens as systemd does on a unixgram socket in a temp dir and points
// NOTIFY_SOCKET at it for the test.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// nextNotify returns the next message on the socket, failing after a deadline.
func nextNotify(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no sd_notify message: %v", err)
	}
	return string(buf[:n])
}

// startBrokerUnderSystemd runs the real `chiffon broker --listen 127.0.0.1:0` and
// returns a func that stops it (as SIGTERM does, through the context) and waits.
func startBrokerUnderSystemd(t *testing.T) (stdout *lockedBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"broker", "--listen", "127.0.0.1:0"}, strings.NewReader(""), stdout, stderr)
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("broker exited %d: %s", c, stderr)
			}
		case <-time.After(20 * time.Second):
			t.Error("broker did not stop")
		}
	}
	t.Cleanup(stop)
	return stdout, stop
}

func TestBrokerTellsSystemdReadyOnceListeningThenStopping(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "")
	stdout, stop := startBrokerUnderSystemd(t)
	if got := nextNotify(t, conn); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1", got)
	}
	// READY=1 means listening: the URL is printed and takes connections.
	u, err := url.Parse(strings.TrimSpace(stdout.String()))
	if err != nil || u.Host == "" {
		t.Fatalf("READY=1 before the broker printed its URL: %q", stdout.String())
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("READY=1 but the broker does not take connections: %v", err)
	}
	c.Close()
	stop()
	if got := nextNotify(t, conn); got != "STOPPING=1" {
		t.Fatalf("after stop: %q, want STOPPING=1", got)
	}
	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a message after STOPPING=1 (%d bytes) or %v", n, err)
	}
}

func TestBrokerPingsTheSystemdWatchdogUntilItStops(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "40000") // WatchdogSec=40ms: a ping each 20ms
	_, stop := startBrokerUnderSystemd(t)
	var got []string
	for len(got) < 4 {
		got = append(got, nextNotify(t, conn))
	}
	count := map[string]int{}
	for _, m := range got {
		count[m]++
	}
	if count["READY=1"] != 1 || count["WATCHDOG=1"] != 3 {
		t.Fatalf("messages %q: want READY=1 once and WATCHDOG=1 pings", got)
	}
	stop()
	for m := nextNotify(t, conn); m != "STOPPING=1"; m = nextNotify(t, conn) {
		if m != "WATCHDOG=1" {
			t.Fatalf("%q before STOPPING=1", m)
		}
	}
}

func TestWatchdogIntervalIsHalfOfWatchdogSec(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	cases := []struct {
		name, usec, pid string
		want            time.Duration
		wantErr         bool
	}{
		{"no watchdog", "", "", 0, false},
		{"WatchdogSec=30s", "30000000", "", 15 * time.Second, false},
		{"WatchdogSec=30s for this process", "30000000", pid, 15 * time.Second, false},
		{"WatchdogSec=30s for another process", "30000000", "1", 0, false},
		{"WatchdogSec=1ms", "1000", "", 500 * time.Microsecond, false},
		{"garbled", "soon", "", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			got, err := watchdogInterval()
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("got %v, %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestNotifySystemdFollowsAnAgentsLife: READY=1 waits for ready (the agent's
// registration), and STOPPING=1 comes at the first signal, while the agent still
// drains, not at exit.
func TestNotifySystemdFollowsAnAgentsLife(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	registered := make(chan struct{})
	stop := notifySystemd(ctx, newLogger(io.Discard), registered)
	defer stop()
	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a message before registration (%d bytes) or %v", n, err)
	}
	close(registered)
	if got := nextNotify(t, conn); got != "READY=1" {
		t.Fatalf("after registration: %q, want READY=1", got)
	}
	cancel() // the first SIGTERM: the agent drains, stop is not called yet
	if got := nextNotify(t, conn); got != "STOPPING=1" {
		t.Fatalf("after the signal: %q, want STOPPING=1", got)
	}
}

func TestNotifySystemdSendsNothingOutsideSystemd(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "2000")
	ctx, cancel := context.WithCancel(context.Background())
	stop := notifySystemd(ctx, newLogger(io.Discard), nil)
	cancel()
	stop()
	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got a message or %v", err)
	}
}

// TestSystemdUnitsAreNotifyAndPassVerify runs `systemd-analyze verify` on
// deploy/systemd's units, with ExecStart and ExecStartPre pointed at a binary that
// exists here.
func TestSystemdUnitsAreNotifyAndPassVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	units, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "systemd", "*.service"))
	if err != nil || len(units) != 3 {
		t.Fatalf("units %v, %v", units, err)
	}
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var args []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "/usr/local/bin/chiffon", bin)
		if !strings.Contains(text, "\nType=notify\n") {
			t.Errorf("%s: not Type=notify", filepath.Base(u))
		}
		name := filepath.Base(u)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		// verify checks a template through one of its instances.
		args = append(args, filepath.Join(dir, strings.Replace(name, "@.service", "@test.service", 1)))
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestOrchestratorTellsSystemdReadyOnceItsAPIListens runs the real `chiffon
// orchestrator`: at READY=1 its API already takes connections.
func TestOrchestratorTellsSystemdReadyOnceItsAPIListens(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "")
	srv := testnats.Start(t, broker.ServerConfig{})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(broker.NewToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, known before READY=1
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"orchestrator", "--nats", srv.ClientURL(), "--data-dir", filepath.Join(dir, "data"),
			"--api-token-file", tokenFile, "--listen", addr}, strings.NewReader(""), io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("orchestrator exited %d: %s", c, stderr)
		}
	}()
	if got := nextNotify(t, conn); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1: %s", got, stderr)
	}
	resp, err := http.Get("http://" + addr + "/livez")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("READY=1 before the API listens: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if got := nextNotify(t, conn); got != "STOPPING=1" {
		t.Fatalf("after stop: %q, want STOPPING=1", got)
	}
}

// TestAgentTellsSystemdReadyOnceRegistered runs the real `chiffon agent` against an
// orchestrator: at READY=1 the orchestrator has accepted its registration.
func TestAgentTellsSystemdReadyOnceRegistered(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "")
	srv := testnats.Start(t, broker.ServerConfig{})
	dir := t.TempDir()
	token, orchToken := broker.NewToken(), broker.NewToken()
	tokenFile, orchTokenFile := filepath.Join(dir, "agent.token"), filepath.Join(dir, "orch.token")
	for f, tok := range map[string]string{tokenFile: token, orchTokenFile: orchToken} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := orchestrator.Open(orchestrator.Config{
		NATS:    broker.NATSConfig{URLs: []string{srv.ClientURL()}},
		DataDir: filepath.Join(dir, "orch"), APIToken: broker.NewToken(),
		Agents: []policy.AgentConfig{{ID: "code-1", Type: envelope.Code, Token: token, OrchestratorToken: orchToken}},
	}, orchestrator.Options{Logger: newLogger(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"agent", "--id", "code-1", "--type", "code", "--nats", srv.ClientURL(),
			"--token-file", tokenFile, "--orchestrator-token-file", orchTokenFile, "--data-dir", filepath.Join(dir, "agent")},
			strings.NewReader(""), io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("agent exited %d: %s", c, stderr)
		}
	}()
	if got := nextNotify(t, conn); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1: %s", got, stderr)
	}
	// Online comes with the heartbeat the agent sends as it turns ready: not waited for.
	if agents := o.Agents(); len(agents) != 1 || agents[0].RegisteredAt == nil {
		t.Fatalf("READY=1 before the agent registered: %+v", agents)
	}
	cancel()
	if got := nextNotify(t, conn); got != "STOPPING=1" {
		t.Fatalf("after stop: %q, want STOPPING=1", got)
	}
}
