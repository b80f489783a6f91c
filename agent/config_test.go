package agent_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"go.yaml.in/yaml/v3"
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
		{"work_types: {t: {command: [x, [--verbose]]}}\n", "work_types.t: command[1]: an optional group must read a parameter"},
		{"work_types: {t: {command: [x, []]}}\n", "an optional group of arguments is empty"},
		{"work_types: {t: {command: [['{{.x}}']]}}\n", "work_types.t: command[0]: the program cannot be an optional group"},
		{"work_types: {t: {command: [x, {a: b}]}}\n", "a command element is a string, or a list of strings"},
		{"work_types: {t: {command: [x], schema: {properties: {p: {x-chiffon-path: true}}}}}\n",
			"work_types.t: schema: x-chiffon-path marks p, a path inside the work type's dir: set dir"},
		{"work_types: {t: {command: [x], dir: /srv, schema: {properties: {p: {items: {x-chiffon-path: true}}}}}}\n",
			"work_types.t: schema: x-chiffon-path at schema #/properties/p/items: it applies to top-level properties only"},
		{"work_types: {t: {command: [x], dir: /srv, schema: {properties: {p: {x-chiffon-path: yes}}}}}\n", "work_types.t: schema"},
		{"work_types: {t: {command: [x, [--n, '-{{.n}}']]}}\n", `work_types.t: command[1][1]: "-{{.n}}" lets a parameter choose an option`},
		{"gpu: {sample_interval: 10ms}\n", "gpu.sample_interval: must be at least 50ms"},
		{"gpu: {sharing: fair}\n", "gpu.sharing: must be exclusive or shared"},
		{"gpu: {nvidia-smi: /x}\n", "nvidia-smi"}, // unknown key
		{"work_types: {t: {command: [x], gpu_vram_mb: -1}}\n", "work_types.t: gpu_vram_mb must be from 0"},
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

func TestCommandReadsOptionalGroupsFromYAMLAndWritesThemBack(t *testing.T) {
	const text = "work_types: {t: {command: [ansible-playbook, [--limit, '{{.limit}}'], '{{.playbook}}']}}\n"
	c, err := agent.ParseConfig([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.Arg{{Text: "ansible-playbook"}, agent.Optional("--limit", "{{.limit}}"), {Text: "{{.playbook}}"}}
	if got := c.WorkTypes["t"].Command; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	b, err := yaml.Marshal(c.WorkTypes["t"].Command)
	if err != nil || string(b) != "- ansible-playbook\n- - --limit\n  - '{{.limit}}'\n- '{{.playbook}}'\n" {
		t.Fatalf("written back as %q, %v", b, err)
	}
}

// TestGPUConfigReads: the gpu section and a work type's gpu_vram_mb read from
// YAML and validate.
func TestGPUConfigReads(t *testing.T) {
	c, err := agent.ParseConfig([]byte("gpu: {nvidia_smi: /opt/nvidia/bin/nvidia-smi, sample_interval: 250ms, sharing: shared}\n" +
		"work_types: {train: {command: [python, train.py], gpu_vram_mb: 8000}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := agent.GPUConfig{NVIDIASMI: "/opt/nvidia/bin/nvidia-smi", SampleInterval: agent.Duration(250 * time.Millisecond), Sharing: agent.GPUShared}
	if c.GPU != want || c.WorkTypes["train"].GPUVRAMMB != 8000 {
		t.Fatalf("gpu %+v, gpu_vram_mb %d", c.GPU, c.WorkTypes["train"].GPUVRAMMB)
	}
	if err := c.Validate(); err != nil && (strings.Contains(err.Error(), "gpu") || strings.Contains(err.Error(), "work_types")) {
		t.Fatalf("valid gpu settings refused: %v", err)
	}
}
