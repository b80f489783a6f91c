package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagsOverrideEnvOverrideFile checks the precedence of settings for both daemons:
// a flag beats an environment variable, which beats the config file.
func TestFlagsOverrideEnvOverrideFile(t *testing.T) {
	dir := t.TempDir()
	agentFile := filepath.Join(dir, "agent.yaml")
	orchFile := filepath.Join(dir, "orch.yaml")
	write := func(p, body string) {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(agentFile, "id: from-file\ntype: infra\nnats: {urls: [nats://file:4222]}\ndata_dir: /file\n")
	write(orchFile, "nats: {urls: [nats://file:4222]}\napi_token_file: a\ndata_dir: /file\nhttp: {listen: 'localhost:1'}\n")

	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantID   string
		wantNATS string
		wantDir  string
	}{
		{"file alone", nil, nil, "from-file", "nats://file:4222", "/file"},
		{"env over file", map[string]string{"CHIFFON_AGENT_ID": "from-env", "CHIFFON_NATS_URL": "nats://env:4222", "CHIFFON_DATA_DIR": "/env"}, nil,
			"from-env", "nats://env:4222", "/env"},
		{"flag over env", map[string]string{"CHIFFON_AGENT_ID": "from-env", "CHIFFON_NATS_URL": "nats://env:4222", "CHIFFON_DATA_DIR": "/env"},
			[]string{"--id", "from-flag", "--nats", "nats://flag:4222", "--data-dir", "/flag"}, "from-flag", "nats://flag:4222", "/flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var af agentFlags
			fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
			af.register(fs)
			if err := fs.Parse(append([]string{"--config", agentFile}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			applyEnv(fs, agentEnv)
			ac, err := af.merged()
			if err != nil {
				t.Fatal(err)
			}
			if ac.ID != tt.wantID || ac.NATS.URLs[0] != tt.wantNATS || ac.DataDir != tt.wantDir {
				t.Errorf("agent: id %q nats %v data %q; want %q %q %q", ac.ID, ac.NATS.URLs, ac.DataDir, tt.wantID, tt.wantNATS, tt.wantDir)
			}

			var of orchFlags
			fs = pflag.NewFlagSet("orchestrator", pflag.ContinueOnError)
			of.register(fs)
			args := []string{"--config", orchFile}
			for i := 0; i+1 < len(tt.args); i += 2 {
				if tt.args[i] != "--id" { // the orchestrator's id is its orch_id
					args = append(args, tt.args[i], tt.args[i+1])
				}
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			applyEnv(fs, orchEnv)
			oc, err := of.merged(fs)
			if err != nil {
				t.Fatal(err)
			}
			if oc.NATS.URLs[0] != tt.wantNATS || oc.DataDir != tt.wantDir {
				t.Errorf("orchestrator: nats %v data %q; want %q %q", oc.NATS.URLs, oc.DataDir, tt.wantNATS, tt.wantDir)
			}
		})
	}
}
