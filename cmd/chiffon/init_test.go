package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestInitWritesConfigsAndPrivateSecrets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "infra,desktop=ws-1",
		"--nats", "nats://hub.lan:4222", "--client", "backup=ws-1")
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"agents/ws-1.yaml", "clients/backup.txt", "agent ws-1:", "ca-key.pem off every host"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	secrets := filepath.Join(dir, "secrets")
	if info, err := os.Stat(secrets); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("secrets dir: %v %v", info, err)
	}
	for _, name := range []string{"api.token", "agent-infra-1.token", "agent-infra-1.orchestrator.token", "agent-ws-1.token",
		"agent-ws-1.orchestrator.token", "orchestrator.nk", "agent-infra-1.nk", "agent-ws-1.nk", "client-backup.nk", "ca-key.pem", "server-key.pem"} {
		path := filepath.Join(secrets, name)
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
	// Every file init's configs name exists; the example work types' commands
	// (ansible-playbook, nvidia-smi) need not be installed on this host, nor
	// their dirs (/srv/ansible) be there: warnings.
	if code != 0 || strings.Contains(out, "is not readable here") {
		t.Fatalf("config check of init's output: exit %d:\n%s", code, out)
	}
	ws, _ := os.ReadFile(filepath.Join(dir, "agents", "ws-1.yaml"))
	for _, want := range []string{"id: ws-1", "type: desktop", "nats://hub.lan:4222", "/var/lib/chiffon/ws-1", "# A desktop agent",
		"nkey_file: " + filepath.Join(secrets, "agent-ws-1.nk"), "ca_file: " + filepath.Join(secrets, "ca.pem"),
		"orchestrator_token_file: " + filepath.Join(secrets, "agent-ws-1.orchestrator.token")} {
		if !strings.Contains(string(ws), want) {
			t.Errorf("ws-1.yaml lacks %q:\n%s", want, ws)
		}
	}
	orch, _ := os.ReadFile(filepath.Join(dir, "orchestrator.yaml"))
	if !regexp.MustCompile(`(?s)agents:.*id: infra-1.*type: infra.*id: ws-1.*type: desktop`).Match(orch) {
		t.Errorf("orchestrator.yaml does not bind both agents to their types:\n%s", orch)
	}
	conf, _ := os.ReadFile(filepath.Join(dir, "broker.conf"))
	for _, want := range []string{"nkey:", "tls", "chiffon.agent.ws-1.work", "chiffon.inbox.client.backup.>"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("broker.conf lacks %q:\n%s", want, conf)
		}
	}
	if regexp.MustCompile(`allow: \[?\s*"?>"?`).Match(conf) || strings.Contains(string(conf), "no_auth_user") {
		t.Errorf("broker.conf lets someone do everything, or anonymous clients in:\n%s", conf)
	}
}

// TestInitGivesEachHostOnlyItsCredentials: no agent host is told to hold another
// agent's token or key, nor the orchestrator's NKey.
func TestInitGivesEachHostOnlyItsCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "infra,code")
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	var infraLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "agent infra-1:") {
			infraLine = l
		}
	}
	if infraLine == "" || !strings.Contains(infraLine, "agent-infra-1.nk") || !strings.Contains(infraLine, "agent-infra-1.orchestrator.token") {
		t.Fatalf("no list of infra-1's files:\n%s", out)
	}
	for _, foreign := range []string{"code-1", "orchestrator.nk", "api.token", "ca-key.pem"} {
		if strings.Contains(infraLine, foreign) {
			t.Errorf("infra-1's host is told to hold %s: %s", foreign, infraLine)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "secrets", "agent-infra-1.orchestrator.token"))
	b, _ := os.ReadFile(filepath.Join(dir, "secrets", "agent-code-1.orchestrator.token"))
	if len(a) == 0 || string(a) == string(b) {
		t.Error("two agents share the orchestrator's token")
	}
}

func TestInitKeepsSecretsAndRefusesToOverwriteConfigs(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	tokenPath := filepath.Join(dir, "secrets", "agent-code-1.token")
	seedPath := filepath.Join(dir, "secrets", "agent-code-1.nk")
	before, _ := os.ReadFile(tokenPath)
	seedBefore, _ := os.ReadFile(seedPath)
	code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code,infra")
	if code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("second init: exit %d, %q; want 1 and a hint at --force", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets", "agent-infra-1.nk")); !os.IsNotExist(err) {
		t.Errorf("a refused init made a new agent's NKey (%v): broker.conf would not list it", err)
	}
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code", "--force"); code != 0 {
		t.Fatalf("init --force: %s", errOut)
	}
	after, _ := os.ReadFile(tokenPath)
	seedAfter, _ := os.ReadFile(seedPath)
	if string(before) != string(after) || len(strings.TrimSpace(string(after))) != 32 || string(seedBefore) != string(seedAfter) {
		t.Errorf("token or NKey changed or malformed across init runs")
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
		{"orchestrator without its agent's tokens", "nats: {urls: [nats://x:4222]}\napi_token_file: a\ndata_dir: d\nagents: [{id: a, type: infra, token_file: t}]\n",
			"agents[0].orchestrator_token_file: is required"},
		{"agent without a type binding", "nats: {urls: [nats://x:4222]}\napi_token_file: a\ndata_dir: d\nagents: [{id: a, token_file: t}]\n",
			"agents[0].type"},
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

func TestConfigCheckWarnsOfCommandsAndDirsNotOnThisHost(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	agentYAML := func(workTypes string) string {
		path := filepath.Join(t.TempDir(), "agent.yaml")
		body := "id: a-1\ntype: infra\nnats: {urls: [\"nats://127.0.0.1:4222\"]}\ndata_dir: " + dir +
			"\ntoken_file: " + tok + "\norchestrator_token_file: " + tok + "\nwork_types:\n" + workTypes
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name, workTypes string
		warnings        []string
	}{
		{"on the PATH", "  w:\n    command: [tool, x]\n", nil},
		{"not on the PATH", "  w:\n    command: [no-such-tool, x]\n", []string{"work_types.w: command no-such-tool is not on this host's PATH"}},
		{"an absolute path", "  w:\n    command: [" + exe + "]\n  v:\n    command: [/no/such/tool]\n",
			[]string{"work_types.v: command /no/such/tool is not an executable file here"}},
		{"a parameter from an enum", "  w:\n    command: [\"{{.cmd}}\"]\n    schema: {properties: {cmd: {enum: [tool, gone]}}}\n",
			[]string{"work_types.w: command gone is not on this host's PATH"}},
		{"a shell script", "  w:\n    shell: no-such-tool\n", nil},
		{"a dir here", "  w:\n    command: [tool]\n    dir: " + dir + "\n  v:\n    command: [tool]\n    dir: " + dir + "/{{.x}}\n", nil},
		{"a dir not here", "  w:\n    command: [tool]\n    dir: /no/such/dir\n",
			[]string{"work_types.w: dir /no/such/dir does not exist on this host"}},
		{"a file as dir", "  w:\n    command: [tool]\n    dir: " + exe + "\n",
			[]string{"work_types.w: dir " + exe + " is not a directory on this host"}},
		{"a templated dir's base not here", "  w:\n    command: [tool]\n    dir: /no/such/{{.x}}\n",
			[]string{"work_types.w: dir /no/such does not exist on this host"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "config", "check", agentYAML(tc.workTypes))
			if code != 0 || !strings.Contains(out, ": ok: agent a-1") {
				t.Fatalf("exit %d, want 0 with warnings:\n%s%s", code, out, errOut)
			}
			if n := strings.Count(out, "warning"); n != len(tc.warnings) {
				t.Errorf("%d warnings, want %d:\n%s", n, len(tc.warnings), out)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(out, ": warning: "+w+"\n") {
					t.Errorf("no warning %q:\n%s", w, out)
				}
			}
		})
	}
}
