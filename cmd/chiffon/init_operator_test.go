package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"
)

// TestInitOperatorWritesASiteARealBrokerLoads: `chiffon init --operator` writes
// a broker.conf that a server loads and `config check` accepts, creds with
// which the orchestrator and an agent connect with their rights and no more,
// and the enroll files with which the orchestrator revokes the agent.
func TestInitOperatorWritesASiteARealBrokerLoads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--operator", "--dir", dir, "--agents", "infra,code", "--client", "ci=code-1",
		"--nats", "nats://127.0.0.1:4222", "--data-root", filepath.Join(t.TempDir(), "data"))
	if code != 0 {
		t.Fatalf("init --operator: exit %d: %s", code, errOut)
	}
	secrets := filepath.Join(dir, "secrets")
	for _, name := range []string{"orchestrator.creds", "orchestrator-store.creds", "agent-infra-1.creds", "client-ci.creds",
		natsjwt.AccountSignerSeed, natsjwt.OperatorSignerSeed, natsjwt.SystemCreds, natsjwt.OperatorSeed, natsjwt.AccountSeed} {
		if info, err := os.Stat(filepath.Join(secrets, name)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", name, info, err)
		}
	}
	if _, err := os.Stat(filepath.Join(secrets, "agent-infra-1.nk")); err == nil {
		t.Error("an NKey seed beside the creds")
	}
	checkOperatorHostFiles(t, out)
	conf := filepath.Join(dir, "broker.conf")
	orchYAML, infraYAML := filepath.Join(dir, "orchestrator.yaml"), filepath.Join(dir, "agents", "infra-1.yaml")
	if code, out, _ := runCLI(t, "", "config", "check", conf, orchYAML, infraYAML); code != 0 || !strings.Contains(out, "operator mode") {
		t.Fatalf("config check: exit %d:\n%s", code, out)
	}
	enroll := readEnroll(t, orchYAML)
	if enroll.AccountSigningKeyFile != filepath.Join(secrets, natsjwt.AccountSignerSeed) ||
		enroll.OperatorSigningKeyFile != filepath.Join(secrets, natsjwt.OperatorSignerSeed) ||
		enroll.SystemCredsFile != filepath.Join(secrets, natsjwt.SystemCreds) || !strings.HasPrefix(enroll.AccountPublicKey, "A") {
		t.Fatalf("enroll section %+v", enroll)
	}

	srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: conf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	orchCfg, err := orchestrator.LoadConfig(orchYAML)
	if err != nil {
		t.Fatal(err)
	}
	infraCfg, err := agent.LoadConfig(infraYAML)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := os.ReadFile(infraCfg.NATS.CredsFile)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.ParseDecoratedNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	if i := slices.IndexFunc(orchCfg.Agents, func(a policy.AgentConfig) bool { return a.ID == "infra-1" }); i < 0 || orchCfg.Agents[i].PublicKey != pub {
		t.Errorf("the orchestrator's entry of infra-1 does not name its key %s (chiffon agent revoke needs it)", pub)
	}
	urls := []string{srv.ClientURL()}
	subj := broker.Subjects{}
	o := connectWithNATS(t, orchCfg.NATS, urls, nil)
	registers, err := o.SubscribeSync(subj.Registers())
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(o, subj.Registers(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	disconnected := make(chan struct{}, 1)
	a := connectWithNATS(t, infraCfg.NATS, urls, disconnected)
	if err := a.Publish(subj.Register("infra-1"), []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := registers.NextMsg(10 * time.Second); err != nil || m.Subject != subj.Register("infra-1") {
		t.Fatalf("the agent's registration: %v", err)
	}
	if _, err := a.SubscribeSync(subj.AgentWork("code-1")); err != nil {
		t.Fatal(err)
	}
	if err := broker.ConfirmSubscription(a, subj.AgentWork("code-1"), 10*time.Second); err == nil {
		t.Fatal("infra-1 may read code-1's work")
	}

	revokeWith(t, enroll, urls, orchCfg.NATS.TLS, infraCfg.NATS.CredsFile)
	select {
	case <-disconnected:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked agent is still connected")
	}
}

// revokeWith revokes the user of creds with the files of an orchestrator's
// enroll section.
func revokeWith(t *testing.T, enroll orchestrator.EnrollConfig, urls []string, tls broker.ClientTLS, creds string) {
	t.Helper()
	auth, err := natsjwt.LoadAuthority(natsjwt.AuthorityFiles{AccountSigningKeyFile: enroll.AccountSigningKeyFile,
		OperatorSigningKeyFile: enroll.OperatorSigningKeyFile, AccountPublicKey: enroll.AccountPublicKey,
		SystemCredsFile: enroll.SystemCredsFile})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := broker.Connect(auth.SystemConnConfig(urls, tls))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := auth.Revoke(ctx, sys, credsPublicKey(t, creds)); err != nil {
		t.Fatal(err)
	}
}

// connectWithNATS connects with a daemon's nats section to urls, reporting a
// disconnection on disconnected if not nil.
func connectWithNATS(t *testing.T, c broker.NATSConfig, urls []string, disconnected chan struct{}) *nats.Conn {
	t.Helper()
	c.URLs = urls
	cfg := c.ConnConfig(t.Name())
	if disconnected != nil {
		cfg.OnDisconnect = func(*nats.Conn, error) {
			select {
			case disconnected <- struct{}{}:
			default:
			}
		}
	}
	nc, err := broker.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// readEnroll reads the enroll section of an orchestrator's config.
func readEnroll(t *testing.T, path string) orchestrator.EnrollConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Enroll orchestrator.EnrollConfig `yaml:"enroll"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Enroll
}

func credsPublicKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// checkOperatorHostFiles: the orchestrator's host gets the enroll files, and no
// host the operator's or the accounts' identity keys.
func checkOperatorHostFiles(t *testing.T, summary string) {
	t.Helper()
	var orch string
	for _, line := range strings.Split(summary, "\n") {
		host, files, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || !strings.HasSuffix(files, ".pem") && !strings.Contains(files, ", ") {
			continue
		}
		names := strings.Split(files, ", ")
		for _, secret := range []string{natsjwt.OperatorSeed, natsjwt.AccountSeed, natsjwt.SystemAccountSeed, "ca-key.pem"} {
			if slices.Contains(names, secret) {
				t.Errorf("host %s is told to hold %s", host, secret)
			}
		}
		if host == "orchestrator" {
			orch = files
		}
	}
	for _, want := range []string{natsjwt.AccountSignerSeed, natsjwt.OperatorSignerSeed, natsjwt.SystemCreds, "orchestrator.creds"} {
		if !strings.Contains(orch, want) {
			t.Errorf("the orchestrator's host is not told to hold %s: %q\n%s", want, orch, summary)
		}
	}
}
