package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
)

// lockedBuffer is a bytes.Buffer safe to write from the command and read from the
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startBrokerCLI runs `chiffon broker args...` until the test ends and returns the
// URL it prints once listening, and its stderr.
func startBrokerCLI(t *testing.T, args ...string) (clientURL string, stderr *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	stderr = &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"broker"}, args...), strings.NewReader(""), outW, stderr)
		outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, outR)
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("broker exited %d: %s", c, stderr)
			}
		case <-time.After(20 * time.Second):
			t.Error("broker did not stop")
		}
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(outR)
		s.Scan()
		line <- s.Text()
	}()
	select {
	case clientURL = <-line:
	case <-time.After(20 * time.Second):
		t.Fatalf("broker printed no URL: %s", stderr)
	}
	if clientURL == "" {
		t.Fatalf("broker stopped: %s", stderr)
	}
	return clientURL, stderr
}

// runBrokerBriefly runs `chiffon broker args...`, stopping it after a few seconds
// should it start rather than refuse.
func runBrokerBriefly(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	code = run(ctx, append([]string{"broker"}, args...), strings.NewReader(""), out, errOut)
	return code, out.String(), errOut.String()
}

func TestBrokerRefusesToRunOpenBeyondLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", "nats.lan:0"} {
		code, out, errOut := runBrokerBriefly(t, "--listen", listen)
		if code != 2 || out != "" || !strings.Contains(errOut, "without authentication") || !strings.Contains(errOut, "--insecure") {
			t.Errorf("--listen %s: exit %d, stdout %q, stderr %q", listen, code, out, errOut)
		}
	}
}

// TestBrokerOpenOnLoopbackStartsAsBefore: a broker without a config starts on
// loopback, and warns that any local process can connect as any daemon.
func TestBrokerOpenOnLoopbackStartsAsBefore(t *testing.T) {
	u, stderr := startBrokerCLI(t, "--listen", "127.0.0.1:0")
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{u}})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if !strings.Contains(stderr.String(), "broker has no authentication: any process on this host can connect") {
		t.Errorf("no warning of the open broker: %s", stderr)
	}
}

func TestBrokerInsecureRunsOpenWithAWarning(t *testing.T) {
	u, stderr := startBrokerCLI(t, "--listen", "0.0.0.0:0", "--insecure")
	if !strings.HasPrefix(u, "nats://0.0.0.0:") {
		t.Fatalf("url %q", u)
	}
	if log := stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "no authentication") || !strings.Contains(log, "read every message") {
		t.Fatalf("no warning naming the risk: %s", log)
	}
}

// TestBrokerConfigFileRequiresAnIdentity runs the broker from a config file like the
// one `chiffon init` writes: it listens where the file says (the --listen default
// does not override it), only a listed NKey gets in, and --listen given does win.
func TestBrokerConfigFileRequiresAnIdentity(t *testing.T) {
	dir := t.TempDir()
	caPath, _, _ := broker.EnsureCA(dir)
	cert, key, err := broker.EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	seed, pub := testnats.NKey(t)
	port := freePort(t)
	conf := filepath.Join(dir, "broker.conf")
	err = broker.WriteServerFile(conf, broker.ServerFile{Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Users: []broker.User{{NKey: pub, Publish: []string{">"}}}, TLS: &broker.ServerTLS{CertFile: cert, KeyFile: key}})
	if err != nil {
		t.Fatal(err)
	}
	u, stderr := startBrokerCLI(t, "--config", conf)
	if got := urlPort(t, u); got != port {
		t.Fatalf("listening on %d, want the file's %d", got, port)
	}
	if !strings.Contains(stderr.String(), "auth=true") || !strings.Contains(stderr.String(), "tls=true") {
		t.Fatalf("log: %s", stderr)
	}
	tlsCfg := broker.ClientTLS{CAFile: caPath}
	if nc, err := broker.Connect(broker.ConnConfig{URLs: []string{u}, TLS: tlsCfg}); err == nil {
		nc.Close()
		t.Fatal("anonymous client connected")
	}
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{u}, TLS: tlsCfg, NKeyFile: seed})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()

	u2, _ := startBrokerCLI(t, "--config", conf, "--listen", "127.0.0.1:0")
	if urlPort(t, u2) == port {
		t.Fatal("--listen did not override the file's address")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func urlPort(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// TestBrokerRefusesAnOpenConfigFileBeyondLoopback: a hand-written config file with no
// users is held to the same rule as no config at all.
func TestBrokerRefusesAnOpenConfigFileBeyondLoopback(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "open.conf")
	if err := os.WriteFile(conf, []byte("listen: \"0.0.0.0:-1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBrokerBriefly(t, "--config", conf)
	if code != 2 || out != "" || !strings.Contains(errOut, "without authentication") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
