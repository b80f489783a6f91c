package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Init     []string                  `yaml:"x-chiffon-init"`
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Build   string   `yaml:"build"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Volumes []string `yaml:"volumes"`
	Secrets []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"secrets"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

const repoRoot = "../.."

// TestComposeFileMatchesTheCLI keeps docker-compose.yml and the code from drifting
// apart: every chiffon command and healthcheck parses with the real CLI, every file it
// references exists once the documented `chiffon init` has run, every config passes
// `config check`, and every token a config names is mounted into its container.
func TestComposeFileMatchesTheCLI(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}

	generated := t.TempDir()
	initArgs := slices.Clone(cf.Init)
	i := slices.Index(initArgs, "--dir")
	if len(initArgs) == 0 || initArgs[0] != "init" || i < 0 || i+1 >= len(initArgs) {
		t.Fatalf("x-chiffon-init must be `init --dir DIR ...`, got %q", cf.Init)
	}
	initDir := initArgs[i+1]
	initArgs[i+1] = generated
	var out, errb bytes.Buffer
	if code := run(context.Background(), initArgs, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("chiffon %s: exit %d: %s", strings.Join(cf.Init, " "), code, errb.String())
	}
	// hostPath maps a path of the compose file to where it is in this test.
	hostPath := func(p string) string {
		p = strings.TrimPrefix(p, "./")
		if rest, ok := strings.CutPrefix(p, initDir+"/"); ok {
			return filepath.Join(generated, rest)
		}
		return filepath.Join(repoRoot, p)
	}
	mustExist := func(what, p string) {
		if _, err := os.Stat(hostPath(p)); err != nil {
			t.Errorf("%s: %s does not exist: %v", what, p, err)
		}
	}

	for name, s := range cf.Secrets {
		mustExist("secret "+name, s.File)
	}
	chiffonServices := 0
	for name, svc := range cf.Services {
		if svc.Image != "chiffon:local" {
			continue
		}
		chiffonServices++
		if svc.Build != "" {
			mustExist(name+" build", filepath.Join(svc.Build, "Dockerfile"))
		}
		mounts := map[string]string{} // container path -> compose source
		var volumeTargets []string
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q: want src:dst", name, v)
				continue
			}
			if strings.HasPrefix(parts[0], "./") {
				mustExist(name+" volume", parts[0])
				mounts[parts[1]] = parts[0]
			} else {
				if _, ok := cf.Volumes[parts[0]]; !ok {
					t.Errorf("%s: named volume %q is not declared", name, parts[0])
				}
				volumeTargets = append(volumeTargets, parts[1])
			}
		}
		secrets := map[string]bool{}
		for _, s := range svc.Secrets {
			if _, ok := cf.Secrets[s.Source]; !ok {
				t.Errorf("%s: secret %q is not declared", name, s.Source)
			}
			secrets["/run/secrets/"+s.Target] = true
		}

		args := parseWithCLI(t, name, svc.Command)
		cfgPath := args["config"]
		src, ok := mounts[cfgPath]
		if !ok {
			t.Errorf("%s: --config %s is not mounted", name, cfgPath)
			continue
		}
		var cfgOut bytes.Buffer
		if !checkConfigFile(&cfgOut, hostPath(src), "") {
			t.Errorf("%s: config check %s:\n%s", name, src, cfgOut.String())
			continue
		}
		tokens, dataDir := configNeeds(t, hostPath(src), svc.Command[0])
		for _, tok := range tokens {
			if !secrets[tok] {
				t.Errorf("%s: config names token %s, which is not mounted as a secret", name, tok)
			}
		}
		if !slices.ContainsFunc(volumeTargets, func(v string) bool { return strings.HasPrefix(dataDir, v+"/") || dataDir == v }) {
			t.Errorf("%s: data_dir %s is not on a volume (%v)", name, dataDir, volumeTargets)
		}

		hc := svc.Healthcheck.Test
		if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/chiffon" {
			t.Errorf("%s: healthcheck must run chiffon, got %q", name, hc)
			continue
		}
		hcArgs := parseWithCLI(t, name+" healthcheck", hc[2:])
		if f := hcArgs["file"]; f != "" && !strings.HasPrefix(f, dataDir+"/") {
			t.Errorf("%s: healthcheck file %s is not in data_dir %s", name, f, dataDir)
		}
	}
	if chiffonServices < 3 {
		t.Errorf("found %d chiffon services, want the orchestrator and two agents", chiffonServices)
	}
	for _, want := range []string{"nats"} {
		if _, ok := cf.Services[want]; !ok {
			t.Errorf("no %s service", want)
		}
	}
}

// parseWithCLI parses args with the real command tree and returns the flags that were
// set, by name.
func parseWithCLI(t *testing.T, what string, args []string) map[string]string {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("%s: %q is not a chiffon command: %v", what, args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("%s: %q: %v", what, args, err)
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		t.Fatalf("%s: %q: %v", what, args, err)
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
			t.Fatalf("%s: %q: %v", what, args, err)
		}
	}
	set := map[string]string{}
	cmd.Flags().Visit(func(f *pflag.Flag) { set[f.Name] = f.Value.String() })
	return set
}

// configNeeds returns the token files a daemon's config names and its data dir.
func configNeeds(t *testing.T, path, daemon string) (tokens []string, dataDir string) {
	t.Helper()
	if daemon == "agent" {
		c, err := agent.LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		return []string{c.TokenFile, c.OrchestratorTokenFile}, c.DataDir
	}
	c, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	tokens = []string{c.TokenFile, c.APITokenFile}
	for _, a := range c.Agents {
		tokens = append(tokens, a.TokenFile)
	}
	return tokens, c.DataDir
}

func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/chiffon", "USER 65532", "AS build", "COPY --from=build"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
