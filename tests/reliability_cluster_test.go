package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator"
)

// faultsBin is chiffon built with -tags chiffonfaults: the same program, plus the
// test-only fault hooks that CHIFFON_FAULTS and CHIFFON_FAULTS_STATS turn on.
var (
	faultsBin      string
	faultsBuild    sync.Once
	faultsBuildErr error
)

// faultsBinary builds the fault-injecting binary once per test run.
func faultsBinary(t *testing.T) string {
	t.Helper()
	faultsBuild.Do(func() {
		faultsBin = filepath.Join(filepath.Dir(chiffonBin), "chiffon-faults")
		out, err := exec.Command("go", "build", "-tags", "chiffonfaults", "-o", faultsBin, "../cmd/chiffon").CombinedOutput()
		if err != nil {
			faultsBuildErr = fmt.Errorf("build chiffon -tags chiffonfaults: %v\n%s", err, out)
		}
	})
	if faultsBuildErr != nil {
		t.Fatal(faultsBuildErr)
	}
	return faultsBin
}

// proc is one daemon process of a cluster. Its stdout and stderr go to a log file
// that every restart of the same daemon appends to.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit, failing the test after d.
func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s (pid %d) did not exit within %s", p.name, p.pid(), d)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 10*time.Second)
}

// stop asks the process to stop with SIGTERM and waits for it.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump in its log
		p.wait(t, 5*time.Second)
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// cluster is a broker, an orchestrator and agents, each its own chiffon process,
// sharing a directory of configs, tokens, data dirs and logs.
type cluster struct {
	t        *testing.T
	bin      string
	dir      string
	logLevel string
	// orchEnv is added to the orchestrator's environment (CHIFFON_FAULTS).
	orchEnv []string

	natsPort  int
	httpAddr  string
	tokens    map[string]string // "orchestrator", "api" and each agent id
	agentType string
	agentIDs  []string
	runsFile  string
	client    *orchestrator.Client
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

// newCluster writes the configs of a cluster with n agents of type "code" and
// starts nothing.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, bin: faultsBinary(t), dir: dir, logLevel: "info",
		natsPort: freePort(t), httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		tokens: map[string]string{}, agentType: "code", agents: map[string]*proc{},
		runsFile: filepath.Join(dir, "runs.log")}
	for _, d := range []string{"tokens", "logs", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.token("orchestrator")
	c.token("api")
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("code-%d", i)
		c.agentIDs = append(c.agentIDs, id)
		c.token(id)
	}
	c.writeOrchConfig()
	for _, id := range c.agentIDs {
		c.writeAgentConfig(id)
	}
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	c.client = &orchestrator.Client{BaseURL: "http://" + c.httpAddr, Token: c.tokens["api"], HTTP: c.http}
	t.Cleanup(func() {
		c.stopAll()
		if t.Failed() || os.Getenv("CHIFFON_REL_LOGS") != "" {
			c.dumpLogs(40)
		}
	})
	return c
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

// token makes a fresh 32-character token for name and writes its file.
func (c *cluster) token(name string) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	c.tokens[name] = string(b)
	if err := os.WriteFile(c.tokenFile(name), append(b, '\n'), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) tokenFile(name string) string { return filepath.Join(c.dir, "tokens", name+".token") }

func (c *cluster) natsURL() string { return "nats://127.0.0.1:" + strconv.Itoa(c.natsPort) }

func (c *cluster) writeOrchConfig() {
	var agents strings.Builder
	for _, id := range c.agentIDs {
		fmt.Fprintf(&agents, "  - {id: %s, token_file: %s}\n", id, c.tokenFile(id))
	}
	cfg := fmt.Sprintf(`id: orch-rel
nats: {urls: [%s]}
token_file: %s
api_token_file: %s
http: {listen: %s}
data_dir: %s
agents:
%stimeouts: {ack: %s, inactivity: %s, deadline_grace: 1s, control: 2s}
retry: {max_retries: 5, initial: 500ms, max: 4s}
breaker: {failures: 5, open_for: 1s}
`, c.natsURL(), c.tokenFile("orchestrator"), c.tokenFile("api"), c.httpAddr,
		filepath.Join(c.dir, "data", "orchestrator"), agents.String(), relAck, relInactivity)
	c.write("orchestrator.yaml", cfg)
}

// workScript is the "count" work type: it records its request_id in the runs file
// before anything else, optionally sleeps, and prints one line that the test can
// predict from the request.
const workScript = `echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"
if [ -n "${CHIFFON_PARAM_SLEEP:-}" ]; then sleep "$CHIFFON_PARAM_SLEEP"; fi
echo "out $CHIFFON_PARAM_N $CHIFFON_REQUEST_ID"`

func (c *cluster) writeAgentConfig(id string) {
	cfg := fmt.Sprintf(`id: %s
type: %s
nats: {urls: [%s]}
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
  hang:
    command: [sleep, "{{.seconds}}"]
`, id, c.agentType, c.natsURL(), c.tokenFile(id), c.tokenFile("orchestrator"),
		filepath.Join(c.dir, "data", id), relHeartbeat, relKeepalive,
		indent(workScript, "      "), c.runsFile)
	c.write(id+".yaml", cfg)
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
	logf, err := os.OpenFile(filepath.Join(c.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	args = append([]string{"--log-level", c.logLevel}, args...)
	cmd := exec.Command(c.bin, args...)
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

// startBroker starts `chiffon broker` on the cluster's NATS port and waits until it
// accepts connections.
func (c *cluster) startBroker() {
	c.t.Helper()
	c.broker = c.spawn("broker", nil, "broker", "--listen", fmt.Sprintf("127.0.0.1:%d", c.natsPort))
	c.waitFor("broker accepting connections", 20*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.natsPort), time.Second)
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
		resp, err := c.http.Get("http://" + c.httpAddr + "/readyz")
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		as, err := c.client.Agents(ctx)
		if err != nil {
			return false
		}
		for _, a := range as {
			if a.ID == id && a.State == "online" && a.LastHeartbeat != nil && a.LastHeartbeat.After(since) {
				return true
			}
		}
		return false
	})
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

// assertNoTokenLogged fails the test when any process logged any token.
func (c *cluster) assertNoTokenLogged() int {
	c.t.Helper()
	lines := 0
	for file, ls := range c.logs() {
		lines += len(ls)
		for i, l := range ls {
			for name, tok := range c.tokens {
				if strings.Contains(l, tok) {
					c.t.Errorf("%s line %d holds the %s token", file, i+1, name)
				}
			}
		}
	}
	return lines
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
