package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go"
)

// cluster is a broker, an orchestrator and agents, each its own chiffon process,
// sharing a directory of configs, data dirs and logs. Its site (NKey identities,
// tokens, the CA and the broker's certificate, broker.conf) is what `chiffon init`
// writes: every process authenticates, every connection is TLS, and each identity
// holds only the subject rights broker.conf gives it.
type cluster struct {
	t        *testing.T
	bin      string
	dir      string
	logLevel string
	// orchEnv is added to the orchestrator's environment (CHIFFON_FAULTS).
	orchEnv []string
	// extraWorkTypes is YAML added to every agent's work_types by writeAgentConfig.
	extraWorkTypes string
	// breaker is the breaker section of the orchestrator's config: relBreaker, or ""
	// for none (the defaults of policy.BreakerConfig).
	breaker string
	// orchExtra is YAML added to the orchestrator's config by writeOrchConfig.
	orchExtra string
	// httpLimits, when set, is the orchestrator's http.limits, in YAML flow style.
	httpLimits string
	// apiTLS, when set, is the orchestrator's http.tls, in YAML flow style
	// (serveAPIOverTLS).
	apiTLS string
	// store is the orchestrator's store.kind: orchestrator.StoreBadger (in its data
	// dir) or orchestrator.StoreJetStream (the broker then runs JetStream).
	store string
	// operator is chiffon init --operator: each identity a .creds file, the
	// broker in NATS operator mode.
	operator bool

	natsPort  int
	httpAddr  string
	siteDir   string            // what chiffon init wrote: broker.conf, secrets/
	tokens    map[string]string // every *.token of the site, by file name
	seeds     map[string]string // every NKey seed (*.nk) of the site, by file name
	agentType string
	agentIDs  []string
	runsFile  string
	client    *client.Client
	http      *http.Client

	mu     sync.Mutex
	broker *proc
	orch   *proc
	agents map[string]*proc
	all    []*proc
}

// clusterTimeouts are the short timeouts the reliability scenarios run with.
const (
	relAck        = 2 * time.Second
	relInactivity = 2 * time.Second
	relKeepalive  = 400 * time.Millisecond
	relHeartbeat  = 500 * time.Millisecond
)

// relBreaker is the breaker the clusters run with: it opens as the default one does,
// but for a second, so that a scenario that opens it still ends in time.
const relBreaker = "breaker: {failures: 5, open_for: 1s}"

// clusterOrchID is the orchestrator's id, in every task inbox subject.
const clusterOrchID = "orch-rel"

// testerClient is the client identity (chiffon init --client) allowed to command
// every agent of a cluster, as a script with its own NATS client would.
const testerClient = "tester"

// newCluster runs `chiffon init` for n agents of type "code" (code-1..code-n) and
// the tester client, writes the daemons' own configs over its secrets, and starts
// nothing.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newSiteCluster(t, n, false)
}

// newSiteCluster is newCluster, in NATS operator mode (chiffon init
// --operator) if operator.
func newSiteCluster(t *testing.T, n int, operator bool) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, bin: faultsBinary(t), dir: dir, logLevel: "info",
		natsPort: freePort(t), httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		siteDir: filepath.Join(dir, "site"), agentType: "code", agents: map[string]*proc{},
		runsFile: filepath.Join(dir, "runs.log"), breaker: relBreaker, store: orchestrator.StoreBadger, operator: operator}
	for _, d := range []string{"logs", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var specs []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("code-%d", i)
		c.agentIDs = append(c.agentIDs, id)
		specs = append(specs, c.agentType+"="+id)
	}
	c.initSite(specs)
	c.writeOrchConfig()
	for _, id := range c.agentIDs {
		c.writeAgentConfig(id)
	}
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	c.client = &client.Client{BaseURL: "http://" + c.httpAddr, Token: c.tokens["api.token"], HTTP: c.http}
	t.Cleanup(func() {
		c.stopAll()
		if t.Failed() || os.Getenv("CHIFFON_REL_LOGS") != "" {
			c.dumpLogs(40)
		}
	})
	return c
}

// initSite runs `chiffon init` for the agents of specs (type=id) and the tester
// client, with the flags of extra, and reads every token and seed it made.
func (c *cluster) initSite(specs []string, extra ...string) {
	c.t.Helper()
	args := append([]string{"init", "--dir", c.siteDir, "--agents", strings.Join(specs, ","),
		"--client", testerClient, "--nats", c.natsURL(), "--listen", c.httpAddr,
		"--secrets-dir", c.secretsDir(), "--data-root", filepath.Join(c.dir, "data"),
		"--broker-listen", c.natsAddr(), "--broker-host", "127.0.0.1"}, extra...)
	identities := "*.nk"
	if c.operator {
		// Each identity's creds, and the system account user's.
		args, identities = append(args, "--operator"), "*.creds"
	}
	got := chiffonBinary(c.t, c.bin, args...)
	if got.code != 0 {
		c.t.Fatalf("chiffon init: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	c.tokens, c.seeds = c.readSecrets("*.token"), c.readSecrets(identities)
	if len(c.tokens) != 1+2*len(specs) || len(c.seeds) != 3+len(specs)+btoi(c.operator) {
		c.t.Fatalf("chiffon init made tokens %v and seeds %v for %d agents", keys(c.tokens), keys(c.seeds), len(specs))
	}
}

// readSecrets reads the secret files matching glob, by file name.
func (c *cluster) readSecrets(glob string) map[string]string {
	c.t.Helper()
	files, err := filepath.Glob(filepath.Join(c.secretsDir(), glob))
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		if out[filepath.Base(f)] = strings.TrimSpace(string(b)); out[filepath.Base(f)] == "" {
			c.t.Fatalf("%s is empty", f)
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dumpLogs logs the last n lines of every process's log, or copies the logs to
// $CHIFFON_REL_LOGS when it is set.
func (c *cluster) dumpLogs(n int) {
	if keep := os.Getenv("CHIFFON_REL_LOGS"); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(c.t.Name(), "/", "_"))
		_ = os.MkdirAll(dst, 0o700)
		_ = exec.Command("cp", "-r", filepath.Join(c.dir, "logs"), dst).Run()
		c.t.Logf("logs copied to %s", dst)
		return
	}
	for file, ls := range c.logs() {
		c.t.Logf("--- last lines of %s:\n%s", file, strings.Join(ls[max(0, len(ls)-n):], "\n"))
	}
}

func (c *cluster) secretsDir() string          { return filepath.Join(c.siteDir, "secrets") }
func (c *cluster) secret(name string) string   { return filepath.Join(c.secretsDir(), name) }
func (c *cluster) brokerConf() string          { return filepath.Join(c.siteDir, "broker.conf") }
func (c *cluster) natsAddr() string            { return "127.0.0.1:" + strconv.Itoa(c.natsPort) }
func (c *cluster) natsURL() string             { return "nats://" + c.natsAddr() }
func (c *cluster) agentToken(id string) string { return c.tokens["agent-"+id+".token"] }

// orchToken is the orchestrator's token for agent id: what that agent accepts.
func (c *cluster) orchToken(id string) string { return c.tokens["agent-"+id+".orchestrator.token"] }

// natsSection is the nats section of a daemon's config: the cluster's broker over
// TLS trusting the site CA, as the identity whose seed is seedFile.
func (c *cluster) natsSection(seedFile string) string {
	key, file := c.identity(seedFile)
	return fmt.Sprintf("nats: {urls: [%s], %s: %s, tls: {ca_file: %s}}", c.natsURL(), key, file, c.secret("ca.pem"))
}

// identity is the config key and the file of the identity whose NKey seed is
// seedFile: its .creds in operator mode.
func (c *cluster) identity(seedFile string) (key, file string) {
	if c.operator {
		return "creds_file", c.secret(strings.TrimSuffix(seedFile, ".nk") + ".creds")
	}
	return "nkey_file", c.secret(seedFile)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// seedName is the name of id's NKey seed file in the site's secrets.
func seedName(id broker.Identity) string {
	switch id.Role {
	case broker.RoleAgent:
		return "agent-" + id.Name + ".nk"
	case broker.RoleClient:
		return "client-" + id.Name + ".nk"
	case broker.RoleStore:
		return "orchestrator-store.nk"
	}
	return "orchestrator.nk"
}

// connect connects to the cluster's broker as id, as its daemon does: its NKey,
// TLS trusting the site CA, and its own inbox prefix. The connection is closed
// when the test ends.
func (c *cluster) connect(id broker.Identity) *nats.Conn {
	c.t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{c.natsURL()}, Name: seedName(id),
		NKeyFile: c.secret(seedName(id)), TLS: broker.ClientTLS{CAFile: c.secret("ca.pem")},
		InboxPrefix: broker.Subjects{}.InboxOf(id)})
	if err != nil {
		c.t.Fatalf("connect as %s: %v", seedName(id), err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

func (c *cluster) orchDataDir() string { return filepath.Join(c.dir, "data", "orchestrator") }

func (c *cluster) writeOrchConfig() {
	var agents strings.Builder
	for _, id := range c.agentIDs {
		fmt.Fprintf(&agents, "  - {id: %s, type: %s, token_file: %s, orchestrator_token_file: %s%s}\n",
			id, c.agentType, c.secret("agent-"+id+".token"), c.secret("agent-"+id+".orchestrator.token"), c.publicKey(id))
	}
	cfg := fmt.Sprintf(`id: %s
%s
api_token_file: %s
http: {listen: %s, limits: {%s}%s}
data_dir: %s
agents:
%stimeouts: {ack: %s, inactivity: %s, deadline_grace: 1s, control: 2s}
retry: {max_retries: 5, initial: 500ms, max: 4s}
store: {kind: %s, jetstream: {nats: {%s}}}
%s
%s
`, clusterOrchID, c.natsSection("orchestrator.nk"), c.secret("api.token"), c.httpAddr, c.httpLimits, c.apiTLS,
		c.orchDataDir(), agents.String(), relAck, relInactivity, c.store, c.storeIdentity(), c.breaker, c.orchExtra)
	c.write("orchestrator.yaml", cfg)
}

// storeIdentity is the store connection's identity, key: file.
func (c *cluster) storeIdentity() string {
	key, file := c.identity("orchestrator-store.nk")
	return key + ": " + file
}

// workScript is the "count" work type: it records its request_id in the runs file
// before anything else, optionally sleeps, and prints one line that the test can
// predict from the request.
const workScript = `echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
if [ -n "${CHIFFON_PARAM_SLEEP:-}" ]; then sleep "$CHIFFON_PARAM_SLEEP"; fi
echo "out $CHIFFON_PARAM_N $CHIFFON_REQUEST_ID"`

// writeAgentConfig writes <id>.yaml: agent id of the cluster's type, with the
// count and hang work types and c.extraWorkTypes.
func (c *cluster) writeAgentConfig(id string) {
	c.writeAgentConfigAs(id+".yaml", id, c.agentType, c.extraWorkTypes)
}

// writeAgentConfigAs writes file, the config of agent id as type typ, with the
// count and hang work types and the work types of the YAML extra.
func (c *cluster) writeAgentConfigAs(file, id, typ, extra string) {
	cfg := fmt.Sprintf(`id: %s
type: %s
%s
token_file: %s
orchestrator_token_file: %s
data_dir: %s
max_concurrency: 4
heartbeat_interval: %s
keepalive_interval: %s
drain_timeout: 5s
work_types:
  count:
    shell: |
%s
    env: [PATH]
    set_env: {RUNS_FILE: %s}
    timeout: 2m
    schema:
      type: object
      properties:
        n: {type: integer}
        sleep: {type: string}
  hang:
    command: [sleep, "{{.seconds}}"]
%s`, id, typ, c.natsSection("agent-"+id+".nk"), c.secret("agent-"+id+".token"), c.secret("agent-"+id+".orchestrator.token"),
		filepath.Join(c.dir, "data", id), relHeartbeat, relKeepalive,
		indent(workScript, "      "), c.runsFile, extra)
	c.write(file, cfg)
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

func (c *cluster) write(name, text string) {
	if err := os.WriteFile(filepath.Join(c.dir, name), []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// spawn starts one chiffon process whose output is appended to logs/<name>.log.
func (c *cluster) spawn(name string, env []string, args ...string) *proc {
	c.t.Helper()
	return c.spawnBin(name, c.bin, env, append([]string{"--log-level", c.logLevel}, args...)...)
}

// spawnBin starts bin as one process of the cluster whose output is appended to
// logs/<name>.log.
func (c *cluster) spawnBin(name, bin string, env []string, args ...string) *proc {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.all = append(c.all, p)
	c.mu.Unlock()
	return p
}

// startBroker starts `chiffon broker` from the broker.conf chiffon init wrote, on the
// cluster's NATS port, and waits until it accepts connections. For the JetStream
// store it runs JetStream, its data in the same directory across restarts.
func (c *cluster) startBroker() {
	c.t.Helper()
	args := []string{"broker", "--config", c.brokerConf(), "--listen", c.natsAddr()}
	if c.store == orchestrator.StoreJetStream {
		args = append(args, "--jetstream", "--store-dir", filepath.Join(c.dir, "data", "broker"))
	}
	c.broker = c.spawn("broker", nil, args...)
	c.waitBroker()
}

// waitBroker waits until the cluster's broker accepts connections.
func (c *cluster) waitBroker() {
	c.t.Helper()
	c.waitFor("broker accepting connections", 20*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", c.natsAddr(), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// startOrchestrator starts the orchestrator and waits until /readyz says ready.
func (c *cluster) startOrchestrator() {
	c.t.Helper()
	c.orch = c.spawn("orchestrator", c.orchEnv, "orchestrator", "--config", filepath.Join(c.dir, "orchestrator.yaml"))
	c.waitFor("orchestrator ready", 30*time.Second, func() bool {
		resp, err := c.http.Get(c.client.BaseURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// startAgent starts agent id and waits until the orchestrator lists it online with
// a heartbeat newer than the start.
func (c *cluster) startAgent(id string) {
	c.t.Helper()
	since := time.Now()
	env := []string{"CHIFFON_FAULTS_STATS=" + c.statsFile(id)}
	p := c.spawn(id, env, "agent", "--config", filepath.Join(c.dir, id+".yaml"))
	c.mu.Lock()
	c.agents[id] = p
	c.mu.Unlock()
	c.waitAgentOnline(id, since)
}

func (c *cluster) statsFile(id string) string { return filepath.Join(c.dir, "logs", id+".stats") }

// waitAgentOnline waits until the orchestrator lists agent id online, with a
// heartbeat after since.
func (c *cluster) waitAgentOnline(id string, since time.Time) {
	c.t.Helper()
	c.waitFor("agent "+id+" online", 30*time.Second, func() bool {
		a, ok := c.agentInfo(id)
		return ok && a.State == "online" && a.LastHeartbeat != nil && a.LastHeartbeat.After(since)
	})
}

// waitAgentRoom waits until the orchestrator lists agent id online with a free slot:
// it would route the next task there.
func (c *cluster) waitAgentRoom(id string) { c.waitAgentSlots(id, 1) }

// waitAgentSlots waits until the orchestrator lists agent id online with n free
// slots.
func (c *cluster) waitAgentSlots(id string, n int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("agent %s online with %d free slots", id, n), 30*time.Second, func() bool {
		a, ok := c.agentInfo(id)
		return ok && a.State == "online" && a.Load <= a.Capacity-n
	})
}

// agentInfo is what the orchestrator's API says of agent id; false when it does not
// answer or does not list it.
func (c *cluster) agentInfo(id string) (api.AgentInfo, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	as, err := c.client.Agents(ctx)
	if err != nil {
		return api.AgentInfo{}, false
	}
	for _, a := range as {
		if a.ID == id {
			return a, true
		}
	}
	return api.AgentInfo{}, false
}

// start starts the broker, the orchestrator and every agent.
func (c *cluster) start() {
	c.t.Helper()
	c.startBroker()
	c.startOrchestrator()
	for _, id := range c.agentIDs {
		c.startAgent(id)
	}
}

// stopAll stops every live process, agents first, then the orchestrator and broker.
func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := append([]*proc(nil), c.all...)
	c.mu.Unlock()
	rank := func(p *proc) int {
		switch p.name {
		case "broker":
			return 2
		case "orchestrator":
			return 1
		}
		return 0
	}
	for r := range 3 {
		var wg sync.WaitGroup
		for _, p := range procs {
			if rank(p) == r {
				wg.Add(1)
				go func() { defer wg.Done(); p.stop(c.t) }()
			}
		}
		wg.Wait()
	}
}

// waitFor polls cond, a check on another process, until it holds or d passes.
func (c *cluster) waitFor(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond) // polling another process; nothing to wait on
	}
}

// logs returns every line every process of the cluster logged.
func (c *cluster) logs() map[string][]string {
	out := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			c.t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			out[filepath.Base(f)] = append(out[filepath.Base(f)], sc.Text())
		}
		fh.Close()
	}
	return out
}

// assertNoTokenLogged fails the test when any process logged any token or NKey
// seed of the site.
func (c *cluster) assertNoTokenLogged() int {
	c.t.Helper()
	lines := 0
	for file, ls := range c.logs() {
		lines += len(ls)
		for i, l := range ls {
			for name, secret := range c.secrets() {
				if strings.Contains(l, secret) {
					c.t.Errorf("%s line %d holds the secret of %s", file, i+1, name)
				}
			}
		}
	}
	return lines
}

// secrets are every token and NKey seed of the site, by file name.
func (c *cluster) secrets() map[string]string {
	out := make(map[string]string, len(c.tokens)+len(c.seeds))
	for _, m := range []map[string]string{c.tokens, c.seeds} {
		for name, v := range m {
			out[name] = v
		}
	}
	return out
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
