package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/site"
	"github.com/nats-io/nats-server/v2/conf"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
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
	Build     string   `yaml:"build"`
	Image     string   `yaml:"image"`
	Command   []string `yaml:"command"`
	Volumes   []string `yaml:"volumes"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Secrets []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"secrets"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

const (
	repoRoot = "../.."
	// composeSecrets is where Compose mounts a service's secrets.
	composeSecrets = "/run/secrets"
)

// TestComposeFileMatchesTheCLI keeps docker-compose.yml and the code from drifting
// apart. It runs the file's `chiffon init` for real, then checks that every chiffon
// command and healthcheck parses with the real CLI, every file the compose file
// references exists, every config passes `config check`, the broker's config loads
// with the mounted files, its certificate names the host the daemons dial, and each
// service mounts exactly the secret files its config names: no more (least
// privilege), no less.
func TestComposeFileMatchesTheCLI(t *testing.T) {
	c := newComposeCheck(t)
	// Each compose secret must be the init-written file whose name the configs use
	// under /run/secrets, so that a mount cannot hand a service someone else's file.
	for name, s := range c.cf.Secrets {
		c.mustExist("secret "+name, s.File)
	}
	var natsHosts []string // hosts the daemons dial
	roles := map[string]int{}
	for name, svc := range c.cf.Services {
		daemon, urls := c.checkService(name, svc)
		roles[daemon]++
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil {
				t.Errorf("%s: nats url %q: %v", name, u, err)
				continue
			}
			natsHosts = append(natsHosts, pu.Hostname())
		}
	}
	if roles["broker"] != 1 || roles["orchestrator"] != 1 || roles["agent"] < 2 {
		t.Errorf("services run %v, want a broker, an orchestrator and two agents", roles)
	}
	slices.Sort(natsHosts)
	checkCertNames(t, filepath.Join(c.generated, "secrets", site.ServerCert), slices.Compact(natsHosts))
}

// composeCheck is docker-compose.yml with the files its `chiffon init` wrote.
type composeCheck struct {
	t  *testing.T
	cf composeFile
	// initDir is init's --dir in the compose file; generated is where this test ran
	// init instead.
	initDir, generated string
}

// newComposeCheck reads docker-compose.yml, checks that its header documents the
// x-chiffon-init command, and runs that command into a temp dir.
func newComposeCheck(t *testing.T) *composeCheck {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	c := &composeCheck{t: t, generated: t.TempDir()}
	if err := yaml.Unmarshal(raw, &c.cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if got := headerInitCommand(string(raw)); !slices.Equal(got, c.cf.Init) {
		t.Errorf("the header's `go run ./cmd/chiffon init` command is %q, want x-chiffon-init's %q", got, c.cf.Init)
	}
	args := slices.Clone(c.cf.Init)
	i := slices.Index(args, "--dir")
	if len(args) == 0 || args[0] != "init" || i < 0 || i+1 >= len(args) {
		t.Fatalf("x-chiffon-init must be `init --dir DIR ...`, got %q", c.cf.Init)
	}
	c.initDir, args[i+1] = args[i+1], c.generated
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("chiffon %s: exit %d: %s", strings.Join(c.cf.Init, " "), code, errb.String())
	}
	return c
}

// hostPath maps a path of the compose file to where it is in this test.
func (c *composeCheck) hostPath(p string) string {
	p = strings.TrimPrefix(p, "./")
	if rest, ok := strings.CutPrefix(p, c.initDir+"/"); ok {
		return filepath.Join(c.generated, rest)
	}
	return filepath.Join(repoRoot, p)
}

func (c *composeCheck) mustExist(what, p string) {
	if _, err := os.Stat(c.hostPath(p)); err != nil {
		c.t.Errorf("%s: %s does not exist: %v", what, p, err)
	}
}

// checkService checks one service and returns the chiffon command it runs and the
// NATS URLs its config dials.
func (c *composeCheck) checkService(name string, svc composeService) (daemon string, urls []string) {
	t := c.t
	if svc.Image != "chiffon:local" {
		t.Errorf("%s: image %q: every service runs the chiffon image", name, svc.Image)
		return "", nil
	}
	if svc.Build != "" {
		c.mustExist(name+" build", filepath.Join(svc.Build, "Dockerfile"))
	}
	for dep, d := range svc.DependsOn {
		if d.Condition == "service_healthy" && len(c.cf.Services[dep].Healthcheck.Test) == 0 {
			t.Errorf("%s: waits for %s to be healthy, which has no healthcheck", name, dep)
		}
	}
	binds, volumeTargets := c.volumes(name, svc)
	mounted := c.secrets(name, svc)

	daemon = svc.Command[0]
	cfgPath := parseWithCLI(t, name, svc.Command)["config"]
	src, ok := binds[cfgPath]
	if !ok {
		t.Errorf("%s: --config %s is not mounted", name, cfgPath)
		return daemon, nil
	}
	var holder secretHolder
	var needs []string
	var dataDir string
	switch daemon {
	case "broker":
		holder = secretHolder{role: "broker"}
		needs = brokerConfNeeds(t, c.hostPath(src))
		checkBrokerConfLoads(t, c.hostPath(src), filepath.Join(c.generated, "secrets"))
	case "agent", "orchestrator":
		var cfgOut bytes.Buffer
		if !checkConfigFile(&cfgOut, c.hostPath(src), daemon) {
			t.Errorf("%s: config check %s:\n%s", name, src, cfgOut.String())
			return daemon, nil
		}
		holder, needs, urls, dataDir = configNeeds(t, c.hostPath(src), daemon)
		onVolume := func(v string) bool { return strings.HasPrefix(dataDir, v+"/") || dataDir == v }
		if !slices.ContainsFunc(volumeTargets, onVolume) {
			t.Errorf("%s: data_dir %s is not on a volume (%v)", name, dataDir, volumeTargets)
		}
	default:
		t.Errorf("%s: runs chiffon %s, not broker, orchestrator or agent", name, daemon)
		return daemon, nil
	}
	checkExactSecrets(t, name, holder, needs, mounted)
	c.checkHealthcheck(name, daemon, svc, dataDir)
	return daemon, urls
}

// volumes returns a service's bind mounts (container path -> compose source) and
// the container paths of its named volumes.
func (c *composeCheck) volumes(name string, svc composeService) (binds map[string]string, named []string) {
	binds = map[string]string{}
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			c.t.Errorf("%s: volume %q: want src:dst", name, v)
			continue
		}
		if strings.HasPrefix(parts[0], "./") {
			c.mustExist(name+" volume", parts[0])
			binds[parts[1]] = parts[0]
			continue
		}
		if _, ok := c.cf.Volumes[parts[0]]; !ok {
			c.t.Errorf("%s: named volume %q is not declared", name, parts[0])
		}
		named = append(named, parts[1])
	}
	return binds, named
}

// secrets returns the container paths of a service's secrets, each checked to be
// the init-written file of the name it is mounted as.
func (c *composeCheck) secrets(name string, svc composeService) map[string]bool {
	mounted := map[string]bool{}
	for _, s := range svc.Secrets {
		decl, ok := c.cf.Secrets[s.Source]
		if !ok {
			c.t.Errorf("%s: secret %q is not declared", name, s.Source)
			continue
		}
		if want := c.initDir + "/secrets/" + s.Target; path.Clean(strings.TrimPrefix(decl.File, "./")) != want {
			c.t.Errorf("%s: secret %s is mounted as %s but is the file %s, not %s", name, s.Source, s.Target, decl.File, want)
		}
		mounted[path.Join(composeSecrets, s.Target)] = true
	}
	return mounted
}

// checkExactSecrets checks that a service mounts exactly the secret files its
// config names, and that its holder may have each one.
func checkExactSecrets(t *testing.T, name string, holder secretHolder, needs []string, mounted map[string]bool) {
	t.Helper()
	for _, f := range needs {
		if dir, _ := path.Split(f); path.Clean(dir) != composeSecrets {
			t.Errorf("%s: config names %s, outside %s where Compose mounts secrets", name, f, composeSecrets)
		} else if !mounted[f] {
			t.Errorf("%s: config names %s, which is not mounted as a secret", name, f)
		}
	}
	for f := range mounted {
		if !slices.Contains(needs, f) {
			t.Errorf("%s: mounts secret %s, which its config does not name", name, f)
		}
		if !holder.mayHold(path.Base(f)) {
			t.Errorf("%s: mounts %s, which %s must not hold", name, f, holder)
		}
	}
}

// checkHealthcheck checks that a service's healthcheck runs chiffon with valid
// flags; the broker may have none (the orchestrator's /readyz covers it).
func (c *composeCheck) checkHealthcheck(name, daemon string, svc composeService, dataDir string) {
	hc := svc.Healthcheck.Test
	if daemon == "broker" && len(hc) == 0 {
		return
	}
	if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/chiffon" {
		c.t.Errorf("%s: healthcheck must run chiffon, got %q", name, hc)
		return
	}
	args := parseWithCLI(c.t, name+" healthcheck", hc[2:])
	if f := args["file"]; f != "" && !strings.HasPrefix(f, dataDir+"/") {
		c.t.Errorf("%s: healthcheck file %s is not in data_dir %s", name, f, dataDir)
	}
}

// TestComposeHolderRules checks the least-privilege rule the compose test applies,
// so that a rule loosened by mistake fails here.
func TestComposeHolderRules(t *testing.T) {
	brk := secretHolder{role: "broker"}
	orch := secretHolder{role: "orchestrator"}
	a := secretHolder{role: "agent", id: "a-1"}
	for _, c := range []struct {
		holder secretHolder
		file   string
		want   bool
	}{
		{brk, "server.pem", true}, {brk, "server-key.pem", true}, {brk, "ca.pem", true},
		{brk, "orchestrator.nk", false}, {brk, "agent-a-1.token", false}, {brk, "ca-key.pem", false},
		{orch, "orchestrator.nk", true}, {orch, "api.token", true}, {orch, "ca.pem", true},
		{orch, "agent-a-1.token", true}, {orch, "agent-a-1.orchestrator.token", true},
		{orch, "agent-a-1.nk", false}, {orch, "server-key.pem", false}, {orch, "ca-key.pem", false},
		{a, "agent-a-1.nk", true}, {a, "agent-a-1.token", true}, {a, "agent-a-1.orchestrator.token", true},
		{a, "ca.pem", true}, {a, "client-agent-a-1.pem", true}, {a, "client-agent-a-1-key.pem", true},
		{a, "agent-b-1.nk", false}, {a, "agent-b-1.token", false}, {a, "agent-b-1.orchestrator.token", false},
		{a, "agent-a-10.token", false}, {a, "orchestrator.nk", false}, {a, "api.token", false},
		{a, "server-key.pem", false}, {a, "ca-key.pem", false}, {a, "client-orchestrator-key.pem", false},
		{a, "client-agent-b-1-key.pem", false}, {a, "client-ops.nk", false},
	} {
		if got := c.holder.mayHold(c.file); got != c.want {
			t.Errorf("%s may hold %s: got %t, want %t", c.holder, c.file, got, c.want)
		}
	}
}

// secretHolder is who runs in a service: the broker, the orchestrator or an agent.
type secretHolder struct{ role, id string }

func (h secretHolder) String() string { return strings.TrimSpace(h.role + " " + h.id) }

// mayHold reports whether h may have the secret file of that name, as `chiffon
// init` lists them per host: the CA certificate is everyone's; the broker's key is
// the broker's; the orchestrator's NKey, the API token and the API's certificate the
// orchestrator's; an
// agent's NKey that agent's alone, and its token pair that agent's and the
// orchestrator's. Nobody holds the CA's key.
func (h secretHolder) mayHold(file string) bool {
	switch file {
	case site.CA:
		return true
	case site.ServerCert, site.ServerKey:
		return h.role == "broker"
	case site.OrchestratorNKey, site.StoreNKey, site.APIToken, site.APICert, site.APIKey, "client-orchestrator.pem", "client-orchestrator-key.pem",
		"client-orchestrator-store.pem", "client-orchestrator-store-key.pem":
		return h.role == "orchestrator"
	}
	switch h.role {
	case "agent":
		return slices.Contains([]string{site.AgentNKey(h.id), site.AgentToken(h.id), site.AgentOrchestratorToken(h.id),
			"client-agent-" + h.id + ".pem", "client-agent-" + h.id + "-key.pem"}, file)
	case "orchestrator":
		return strings.HasPrefix(file, "agent-") && strings.HasSuffix(file, ".token")
	}
	return false
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

// configNeeds returns who a daemon's config makes its holder, every secret file it
// names, its NATS URLs and its data dir.
func configNeeds(t *testing.T, path, daemon string) (holder secretHolder, files, urls []string, dataDir string) {
	t.Helper()
	natsFiles := func(c broker.NATSConfig) []string {
		return []string{c.NKeyFile, c.CredsFile, c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile}
	}
	if daemon == "agent" {
		c, err := agent.LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(natsFiles(c.NATS), c.TokenFile, c.OrchestratorTokenFile)
		return secretHolder{role: "agent", id: c.ID}, nonEmpty(files), c.NATS.URLs, c.DataDir
	}
	c, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	files = append(natsFiles(c.NATS), c.APITokenFile, c.HTTP.TLS.CertFile, c.HTTP.TLS.KeyFile)
	for _, a := range c.Agents {
		files = append(files, a.TokenFile, a.OrchestratorTokenFile)
	}
	return secretHolder{role: "orchestrator"}, nonEmpty(files), c.NATS.URLs, c.DataDir
}

// brokerConfNeeds returns the files a nats-server config names in its tls block.
func brokerConfNeeds(t *testing.T, path string) []string {
	t.Helper()
	m, err := conf.ParseFile(path)
	if err != nil {
		t.Fatalf("broker config %s: %v", path, err)
	}
	if _, ok := m["authorization"]; !ok {
		t.Errorf("broker config %s has no authorization block: the broker would be open", path)
	}
	tls, ok := m["tls"].(map[string]any)
	if !ok {
		t.Fatalf("broker config %s has no tls block", path)
	}
	var files []string
	for _, key := range []string{"cert_file", "key_file", "ca_file"} {
		if f, ok := tls[key].(string); ok {
			files = append(files, f)
		}
	}
	return files
}

// checkBrokerConfLoads starts a broker from the config at path, its secret files
// read from secrets instead of /run/secrets, and checks it requires authentication
// and TLS.
func checkBrokerConfLoads(t *testing.T, path, secrets string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "broker.conf")
	text := strings.ReplaceAll(string(b), `"`+composeSecrets+"/", `"`+secrets+"/")
	if err := os.WriteFile(local, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: local, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatalf("broker config %s does not load: %v", path, err)
	}
	defer srv.Shutdown()
	if !srv.AuthRequired() || !srv.TLSRequired() {
		t.Errorf("broker from %s: auth required %t, TLS required %t; want both", path, srv.AuthRequired(), srv.TLSRequired())
	}
}

// checkCertNames checks that the broker's certificate is valid for every host the
// daemons dial, so that TLS verification succeeds in the containers.
func checkCertNames(t *testing.T, certFile string, hosts []string) {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) == 0 {
		t.Error("no daemon dials the broker")
	}
	for _, h := range hosts {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("daemons dial %s, but the broker's certificate does not name it (init --broker-host): %v", h, err)
		}
	}
}

// headerInitCommand returns the arguments of the `go run ./cmd/chiffon init` command
// that docker-compose.yml's header comment tells users to run, from "init" on.
func headerInitCommand(file string) []string {
	var cmd string
	in := false
	for _, line := range strings.Split(file, "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		text = strings.TrimSpace(text)
		if rest, found := strings.CutPrefix(text, "go run ./cmd/chiffon "); found {
			in, text = true, rest
		}
		if !in {
			continue
		}
		cmd += " " + strings.TrimSuffix(text, "\\")
		if !strings.HasSuffix(text, "\\") {
			break
		}
	}
	return strings.Fields(cmd)
}

func nonEmpty(ss []string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
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

// TestDockerIgnoreKeepsSecretsOutOfTheBuild checks that the files `chiffon init` and
// `chiffon up` write are not sent to the image build, whose first stage copies the
// whole context.
func TestDockerIgnoreKeepsSecretsOutOfTheBuild(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	for _, want := range []string{"deploy/compose", "chiffon-data"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}
