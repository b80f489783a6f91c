package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats-server/v2/server"
)

// TestInitWebsocketServesTheSitesIdentitiesOverWSS: a site of `chiffon init
// --websocket --mutual-tls` names the public host in the broker's certificate,
// passes config check, and `chiffon broker --config` serves wss:// where an
// agent's own config, its URL made wss://, connects with its NKey and client
// certificate.
func TestInitWebsocketServesTheSitesIdentitiesOverWSS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	natsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	wsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	code, out, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code", "--nats", "nats://"+natsAddr,
		"--broker-listen", natsAddr, "--mutual-tls", "--websocket", wsAddr, "--websocket-host", "vps-gate.example.org")
	if code != 0 {
		t.Fatalf("init --websocket: exit %d: %s", code, errOut)
	}
	if want := "nats.urls is [wss://vps-gate.example.org:" + strings.Split(wsAddr, ":")[1] + "]"; !strings.Contains(out, want) {
		t.Errorf("summary lacks %q:\n%s", want, out)
	}
	if sans := readPEMCert(t, filepath.Join(dir, "secrets", "server.pem")).DNSNames; !slices.Contains(sans, "vps-gate.example.org") {
		t.Errorf("the broker's certificate names %v, not the host agents beyond the LAN dial", sans)
	}
	conf := filepath.Join(dir, "broker.conf")
	if code, out, errOut := runCLI(t, "", "config", "check", conf); code != 0 || !strings.Contains(out, "WebSocket on "+wsAddr+" with TLS") {
		t.Fatalf("config check: exit %d: %s%s", code, out, errOut)
	}
	_, stderr := startBrokerCLI(t, "--config", conf)
	if !strings.Contains(stderr.String(), "url=wss://"+wsAddr) {
		t.Fatalf("the broker does not say it serves wss://%s:\n%s", wsAddr, stderr)
	}
	cfg, err := agent.LoadConfig(filepath.Join(dir, "agents", "code-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URLs = []string{"wss://" + wsAddr}
	nc := connectAs(t, cfg.NATS, broker.Identity{Role: broker.RoleAgent, Name: "code-1"})
	if !strings.HasPrefix(nc.ConnectedUrl(), "wss://") {
		t.Fatalf("connected to %s", nc.ConnectedUrl())
	}
	if _, err := nc.SubscribeSync(broker.Subjects{}.AgentWork("code-1")); err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(nc, broker.Subjects{}.AgentWork("code-1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cfg.NATS.TLS.CertFile, cfg.NATS.TLS.KeyFile = "", ""
	if nc, err := broker.Connect(cfg.NATS.ConnConfig(t.Name())); err == nil {
		nc.Close()
		t.Fatal("an agent without its client certificate connected over wss://")
	}
}

// TestInitHAWebsocketOnEveryNode: with --ha, one --websocket address serves on
// every node, three give each node its own, and every node's certificate names
// the hosts of --websocket-host.
func TestInitHAWebsocketOnEveryNode(t *testing.T) {
	for _, tc := range []struct {
		listen string
		ports  []int
	}{
		{"8443", []int{8443, 8443, 8443}},
		{"8443,8444,8445", []int{8443, 8444, 8445}},
	} {
		dir := filepath.Join(t.TempDir(), "site")
		code, _, errOut := runCLI(t, "", "init", "--ha", "--dir", dir, "--agents", "code",
			"--nats", "nats://n1.lan:4222,nats://n2.lan:4223,nats://n3.lan:4224", "--broker-listen", "10.0.0.9:4222",
			"--websocket", tc.listen, "--websocket-host", "gate.example.org")
		if code != 0 {
			t.Fatalf("init --ha --websocket %s: exit %d: %s", tc.listen, code, errOut)
		}
		for i, port := range tc.ports {
			node := fmt.Sprintf("broker-%d", i+1)
			opts, err := server.ProcessConfigFile(filepath.Join(dir, node+".conf"))
			if err != nil {
				t.Fatal(err)
			}
			if w := opts.Websocket; w.Host != "10.0.0.9" || w.Port != port || w.TLSConfig == nil || w.NoTLS {
				t.Errorf("--websocket %s: %s's websocket on %s:%d, TLS %v", tc.listen, node, w.Host, w.Port, w.TLSConfig != nil)
			}
			sans := readPEMCert(t, filepath.Join(dir, "secrets", node+".pem")).DNSNames
			if !slices.Contains(sans, "gate.example.org") || !slices.Contains(sans, fmt.Sprintf("n%d.lan", i+1)) {
				t.Errorf("%s's certificate names %v", node, sans)
			}
		}
	}
}

// TestInitWebsocketWithoutTLSOnlyOnLoopback: --websocket-no-tls writes no_tls on
// 127.0.0.1 and is refused beyond it, as are the flags that need --websocket
// without it and addresses that are not one.
func TestInitWebsocketWithoutTLSOnlyOnLoopback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code", "--websocket", "127.0.0.1:8443", "--websocket-no-tls"); code != 0 {
		t.Fatalf("init --websocket-no-tls on loopback: exit %d: %s", code, errOut)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "broker.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if w := opts.Websocket; w.Host != "127.0.0.1" || w.Port != 8443 || !w.NoTLS || w.TLSConfig != nil {
		t.Fatalf("websocket on %s:%d, no_tls %v, TLS %v", w.Host, w.Port, w.NoTLS, w.TLSConfig != nil)
	}
	three := "nats://a:4222,nats://b:4222,nats://c:4222"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--websocket", "8443", "--websocket-no-tls"}, "0.0.0.0:8443 is beyond loopback"},
		{[]string{"--websocket", "192.168.1.10:8443", "--websocket-no-tls"}, "beyond loopback"},
		{[]string{"--websocket-no-tls"}, "need --websocket"},
		{[]string{"--websocket-host", "gate.example.org"}, "need --websocket"},
		{[]string{"--websocket", "gate.example.org"}, "not a port or host:port"},
		{[]string{"--websocket", "8443,8444"}, "needs one address"},
		{[]string{"--ha", "--nats", three, "--websocket", "8443,8444"}, "one per node"},
	} {
		dir := filepath.Join(t.TempDir(), "site")
		code, _, errOut := runCLI(t, "", append([]string{"init", "--dir", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("init %v: exit %d, %q; want a usage error (2) with %q", tc.args, code, errOut, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("init %v wrote %s", tc.args, dir)
		}
	}
}

// TestBrokerRefusesPlainWebsocketBeyondLoopback: a hand-written config whose
// websocket block has no TLS beyond loopback is refused at start.
func TestBrokerRefusesPlainWebsocketBeyondLoopback(t *testing.T) {
	_, pub := testnats.NKey(t)
	conf := filepath.Join(t.TempDir(), "broker.conf")
	text := fmt.Sprintf("listen: \"127.0.0.1:-1\"\nwebsocket { listen: \"0.0.0.0:-1\", no_tls: true }\n"+
		"authorization { users = [ { nkey: %q } ] }\n", pub)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBrokerBriefly(t, "--config", conf)
	if code != 2 || out != "" || !strings.Contains(errOut, "WebSocket without TLS") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
