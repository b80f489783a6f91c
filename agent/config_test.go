package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
)

func TestExampleConfigsLoad(t *testing.T) {
	paths, _ := filepath.Glob("../examples/agents/*.yaml")
	if len(paths) != 4 {
		t.Fatalf("want 4 example configs, found %v", paths)
	}
	for _, p := range paths {
		cfg, err := agent.LoadConfig(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(cfg.WorkTypes) == 0 {
			t.Fatalf("%s: no work types", p)
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"id: 'bad id'\n", "id:"},
		{"type: robot\n", "type:"},
		{"nats_url: x\n", "nats_url"}, // unknown key
		{"keepalive_interval: 30s\n", "keepalive_interval"},
		{"labels: {Site: attic}\n", "labels.Site: the key"},
		{"labels: {site: \"a\\tb\"}\n", "labels.site: the value"},
		{"work_types: {Bad: {command: [x]}}\n", "work_types.Bad"},
		{"work_types: {t: {command: ['{{.x']}}\n", "work_types.t"},
		{"work_types: {t: {}}\n", "work_types.t: command or shell"},
		{"work_types: {t: {command: [x], schema: {type: 12}}}\n", "work_types.t: schema"},
		{"work_types: {t: {command: [x], dir: '{{.d}}'}}\n", "work_types.t: dir: a templated dir needs an absolute literal base"},
		{"work_types: {t: {command: [x], dir: 'repos/{{.d}}'}}\n", "work_types.t: dir: a templated dir needs"},
		{"work_types: {t: {command: [x], dir: /srv, dir_base: srv}}\n", "work_types.t: dir_base"},
		{"work_types: {t: {command: [x], dir_base: /srv}}\n", "work_types.t: dir_base: set without dir"},
		{"work_types: {t: {shell: x, schema: {properties: {dry-run: {}}}}}\n", `work_types.t: schema: property "dry-run" cannot be passed as CHIFFON_PARAM_`},
		{"work_types: {t: {shell: x, schema: {properties: {repo: {}, REPO: {}}}}}\n", "would both be CHIFFON_PARAM_REPO"},
		{"work_types: {t: {command: [x], run_as: no-such-user-chiffon}}\n", "work_types.t: run_as"},
		{"work_types: {t: {command: [x, '-{{.flag}}']}}\n", `work_types.t: command[1]: "-{{.flag}}" lets a parameter choose an option`},
	} {
		p := filepath.Join(t.TempDir(), "a.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := agent.LoadConfig(p)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v, want it to name %q", tc.yaml, err, tc.key)
		}
	}
}

func TestParameterNamesOnlyMatterForShellVariables(t *testing.T) {
	// A command work type passes no CHIFFON_PARAM_*, so any property name is fine.
	c, err := agent.ParseConfig([]byte("work_types: {t: {command: [x], schema: {properties: {dry-run: {}}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "work_types.t") {
		t.Fatalf("command work type with property dry-run: %v", err)
	}
}
