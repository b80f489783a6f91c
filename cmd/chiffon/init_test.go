package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestInitWritesConfigsAndPrivateTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "infra,desktop=ws-1", "--nats", "nats://hub.lan:4222")
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "agents/ws-1.yaml") {
		t.Errorf("summary does not list ws-1:\n%s", out)
	}
	for _, name := range []string{"orchestrator", "api", "infra-1", "ws-1"} {
		path := filepath.Join(dir, "tokens", name+".token")
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, info.Mode().Perm())
		}
	}
	code, out, _ = runCLI(t, "", "config", "check", filepath.Join(dir, "orchestrator.yaml"),
		filepath.Join(dir, "agents", "infra-1.yaml"), filepath.Join(dir, "agents", "ws-1.yaml"))
	if code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("config check of init's output: exit %d:\n%s", code, out)
	}
	ws, _ := os.ReadFile(filepath.Join(dir, "agents", "ws-1.yaml"))
	for _, want := range []string{"id: ws-1", "type: desktop", "nats://hub.lan:4222", "/var/lib/chiffon/ws-1", "# A desktop agent"} {
		if !strings.Contains(string(ws), want) {
			t.Errorf("ws-1.yaml lacks %q:\n%s", want, ws)
		}
	}
	orch, _ := os.ReadFile(filepath.Join(dir, "orchestrator.yaml"))
	if !regexp.MustCompile(`(?s)agents:.*id: infra-1.*id: ws-1`).Match(orch) {
		t.Errorf("orchestrator.yaml does not allow both agents:\n%s", orch)
	}
}

func TestInitKeepsTokensAndRefusesToOverwriteConfigs(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	tokenPath := filepath.Join(dir, "tokens", "code-1.token")
	before, _ := os.ReadFile(tokenPath)
	code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code")
	if code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("second init: exit %d, %q; want 1 and a hint at --force", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code", "--force"); code != 0 {
		t.Fatalf("init --force: %s", errOut)
	}
	after, _ := os.ReadFile(tokenPath)
	if string(before) != string(after) || len(strings.TrimSpace(string(after))) != 32 {
		t.Errorf("token changed or malformed across init runs")
	}
}

func TestInitRejectsBadAgents(t *testing.T) {
	for _, agents := range []string{"infra,printer", "infra=bad.id", "infra,infra"} {
		code, _, errOut := runCLI(t, "", "init", "--dir", t.TempDir(), "--agents", agents)
		if code != 2 || !strings.Contains(errOut, "--agents") {
			t.Errorf("--agents %s: exit %d, %q; want 2", agents, code, errOut)
		}
	}
}

func TestConfigCheckNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, body, want string
	}{
		{"unknown key", "id: a\ntype: infra\nbogus: 1\n", "line 3: bogus: unknown key"},
		{"bad id", "id: 'a b'\ntype: infra\nnats: {urls: [nats://x:4222]}\ntoken_file: t\norchestrator_token_file: o\ndata_dir: d\n", "id: must be"},
		{"no urls", "id: a\ntype: infra\ntoken_file: t\norchestrator_token_file: o\ndata_dir: d\n", "nats.urls:"},
		{"bad duration", "id: a\ntype: infra\nheartbeat_interval: soon\n", "line 3: heartbeat_interval: "},
		{"orchestrator without token", "nats: {urls: [nats://x:4222]}\napi_token_file: a\ndata_dir: d\n", "token_file: is required"},
		{"not yaml", ":\n- [", "not YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := runCLI(t, "", "config", "check", write(strings.ReplaceAll(tt.name, " ", "_")+".yaml", tt.body))
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output %q; want 1 and %q", code, out, tt.want)
			}
		})
	}
	if code, _, _ := runCLI(t, "", "config", "check", "--kind", "printer", "x"); code != 2 {
		t.Errorf("--kind printer: exit %d, want 2", code)
	}
}
