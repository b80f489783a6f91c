package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// haSite is a group of orchestrators over a three-node NATS cluster: the nodes
// run in the test's process or as `chiffon broker` processes (routes between
// them on 127.0.0.1, JetStream on each, their data kept across a restart), the
// orchestrators and the agents are processes of the built binary. The orchestrators share one id and keep their
// tasks in a JetStream stream of 3 replicas.
type haSite struct {
	t     *testing.T
	bin   string
	dir   string
	lease time.Duration

	nats natsNodes

	apiToken string
	tokens   map[string]string // agent id -> the agent's token
	orchToks map[string]string // agent id -> the orchestrator's token for it
	agentIDs []string
	runsFile string
	http     *http.Client

	mu     sync.Mutex
	orchs  []*haOrch
	agents map[string]*proc
	all    []*proc
}

// haOrch is one orchestrator of the group.
type haOrch struct {
	name   string
	addr   string // its HTTP API, host:port
	p      *proc
	client *client.Client
}

// haStream is the stream the group keeps its tasks in.
const haStream = "CHIFFON_TASKS"

// natsNodes are the three NATS nodes of a haSite.
type natsNodes interface {
	// ClientURLs are the nodes' client URLs, the same across restarts.
	ClientURLs() []string
	// NodeIndex is the index of the node a stream's cluster info names, or -1.
	NodeIndex(name string) int
	// kill stops node i at once, its data kept on disk; start starts it again
	// on its ports and data and waits until it has rejoined the cluster.
	kill(i int)
	start(i int)
}

// embeddedNodes are nodes in the test's process: a kill is a shutdown, which
// hands its stream leaderships over before it stops.
type embeddedNodes struct{ *testnats.Cluster }

func (n embeddedNodes) kill(i int)  { n.Shutdown(i) }
func (n embeddedNodes) start(i int) { n.Restart(i) }

// newHASite starts the three nodes in the test's process and writes the configs
// of orchestrators orch-1..orch-<orchs> and agents code-1..code-<agents>; it
// starts no other process.
func newHASite(t *testing.T, orchs, agents int, lease time.Duration) *haSite {
	t.Helper()
	return newHASiteOn(t, orchs, agents, lease, func(s *haSite) natsNodes {
		// The cluster's cleanup, registered before the site's, runs after the
		// processes stop.
		return embeddedNodes{testnats.StartCluster(t, broker.LocalClusterConfig{Dir: filepath.Join(s.dir, "data"), MaxPayload: 8 << 20})}
	})
}

// newHASiteOn is newHASite on the nodes start starts.
func newHASiteOn(t *testing.T, orchs, agents int, lease time.Duration, start func(*haSite) natsNodes) *haSite {
	t.Helper()
	s := &haSite{t: t, bin: faultsBinary(t), dir: t.TempDir(), lease: lease, apiToken: broker.NewToken(),
		tokens: map[string]string{}, orchToks: map[string]string{}, agents: map[string]*proc{},
		http: &http.Client{Timeout: 30 * time.Second}}
	s.runsFile = filepath.Join(s.dir, "runs.log")
	for _, d := range []string{"logs", "data", "secrets"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s.nats = start(s)
	t.Cleanup(func() {
		s.stopAll()
		if t.Failed() || os.Getenv("CHIFFON_REL_LOGS") != "" {
			s.dumpLogs(60)
		}
	})
	s.writeSecret("api.token", s.apiToken)
	for i := 1; i <= agents; i++ {
		id := fmt.Sprintf("code-%d", i)
		s.agentIDs = append(s.agentIDs, id)
		s.tokens[id], s.orchToks[id] = broker.NewToken(), broker.NewToken()
		s.writeSecret(id+".token", s.tokens[id])
		s.writeSecret(id+".orchestrator.token", s.orchToks[id])
		s.writeAgentConfig(id)
	}
	for i := 1; i <= orchs; i++ {
		o := &haOrch{name: fmt.Sprintf("orch-%d", i), addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
		o.client = &client.Client{BaseURL: "http://" + o.addr, Token: s.apiToken, HTTP: s.http}
		s.orchs = append(s.orchs, o)
		s.writeOrchConfig(o)
	}
	return s
}

// killNode stops node i at once (its data stays on disk): a SIGKILL for a
// node process, a shutdown for one in the test's process.
func (s *haSite) killNode(i int) { s.nats.kill(i) }

// startNode starts node i again on its ports and its data, and waits until it has
// rejoined the cluster.
func (s *haSite) startNode(i int) { s.nats.start(i) }

// urls are the client URLs of the three nodes.
func (s *haSite) urls() []string { return s.nats.ClientURLs() }

// connect connects the test to the cluster, as a monitor or to read the stream.
func (s *haSite) connect() *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(strings.Join(s.urls(), ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// streamLeader returns the index of the node that leads the task stream, or -1
// (also while the stream elects one: the question waits a second).
func (s *haSite) streamLeader(js jetstream.JetStream) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := js.Stream(ctx, haStream)
	if err != nil {
		return -1
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		return -1
	}
	return s.nats.NodeIndex(info.Cluster.Leader)
}

func (s *haSite) writeSecret(name, value string) {
	if err := os.WriteFile(filepath.Join(s.dir, "secrets", name), []byte(value+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *haSite) secret(name string) string { return filepath.Join(s.dir, "secrets", name) }

// natsSection lists every node, so that a daemon fails over between them.
func (s *haSite) natsSection() string {
	return "nats: {urls: [" + strings.Join(s.urls(), ", ") + "]}"
}

func (s *haSite) writeOrchConfig(o *haOrch) {
	var agents strings.Builder
	for _, id := range s.agentIDs {
		fmt.Fprintf(&agents, "  - {id: %s, type: code, token_file: %s, orchestrator_token_file: %s}\n",
			id, s.secret(id+".token"), s.secret(id+".orchestrator.token"))
	}
	cfg := fmt.Sprintf(`id: orch-group
%s
api_token_file: %s
http: {listen: %s}
data_dir: %s
store:
  kind: jetstream
  jetstream: {replicas: 3}
ha: {enabled: true, lease: %s, advertise_url: "http://%s"}
agents:
%stimeouts: {ack: %s, inactivity: %s, deadline_grace: 1s, control: 2s}
retry: {max_retries: 5, initial: 500ms, max: 4s}
%s
`, s.natsSection(), s.secret("api.token"), o.addr, filepath.Join(s.dir, "data", o.name), s.lease, o.addr,
		agents.String(), relAck, relInactivity, relBreaker)
	s.write(o.name+".yaml", cfg)
}

func (s *haSite) writeAgentConfig(id string) {
	cfg := fmt.Sprintf(`id: %s
type: code
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
  gated:
    shell: |
      echo started
      while [ ! -e "$CHIFFON_PARAM_GATE" ]; do sleep 0.05; done
      echo done
      exit "$CHIFFON_PARAM_CODE"
    env: [PATH]
    timeout: 2m
    schema:
      type: object
      required: [gate, code]
      properties:
        gate: {type: string}
        code: {type: integer}
`, id, s.natsSection(), s.secret(id+".token"), s.secret(id+".orchestrator.token"),
		filepath.Join(s.dir, "data", id), relHeartbeat, relKeepalive, indent(workScript, "      "), s.runsFile)
	s.write(id+".yaml", cfg)
}

func (s *haSite) write(name, text string) {
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// spawn starts one chiffon process whose output is appended to logs/<name>.log.
func (s *haSite) spawn(name string, args ...string) *proc {
	s.t.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, append([]string{"--log-level", "info"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.all = append(s.all, p)
	s.mu.Unlock()
	return p
}

// startOrch starts orchestrator i and waits until its /readyz answers ready, as
// leader or standby.
func (s *haSite) startOrch(i int) {
	s.t.Helper()
	o := s.orchs[i]
	o.p = s.spawn(o.name, "orchestrator", "--config", filepath.Join(s.dir, o.name+".yaml"))
	s.waitFor(o.name+" ready", 30*time.Second, func() bool { return s.role(i) != "" })
}

// role is what orchestrator i's /readyz says it is: "leader", "standby", or ""
// when it does not answer ready.
func (s *haSite) role(i int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := s.orchs[i].client.Readiness(ctx)
	if err != nil || r.Status != "ready" {
		return ""
	}
	return r.Role.Role
}

// leader waits until exactly one orchestrator says it leads, and returns it.
func (s *haSite) leader(d time.Duration) int {
	s.t.Helper()
	lead := -1
	s.waitFor("one leader", d, func() bool {
		lead = -1
		for i, o := range s.orchs {
			if o.p == nil || !o.p.alive() {
				continue
			}
			if s.role(i) == "leader" {
				if lead >= 0 {
					return false
				}
				lead = i
			}
		}
		return lead >= 0
	})
	return lead
}

// startAgent starts agent id and waits until the leader lists it online.
func (s *haSite) startAgent(id string) {
	s.t.Helper()
	p := s.spawn(id, "agent", "--config", filepath.Join(s.dir, id+".yaml"))
	s.mu.Lock()
	s.agents[id] = p
	s.mu.Unlock()
	lead := s.leader(30 * time.Second)
	s.waitFor(id+" online", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		as, err := s.orchs[lead].client.Agents(ctx)
		if err != nil {
			return false
		}
		for _, a := range as {
			if a.ID == id {
				return a.State == "online"
			}
		}
		return false
	})
}

// stopAll stops every live process: the agents, then the orchestrators, then
// the NATS nodes.
func (s *haSite) stopAll() {
	s.mu.Lock()
	procs := append([]*proc(nil), s.all...)
	s.mu.Unlock()
	for _, prefix := range []string{"code-", "orch-", "node-"} {
		var wg sync.WaitGroup
		for _, p := range procs {
			if strings.HasPrefix(p.name, prefix) {
				wg.Add(1)
				go func() { defer wg.Done(); p.stop(s.t) }()
			}
		}
		wg.Wait()
	}
}

// waitFor polls cond, a check on other processes, until it holds or d passes.
func (s *haSite) waitFor(what string, d time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond) // polling other processes; nothing to wait on
	}
}

// runs counts, by request_id, how often the count work type started.
func (s *haSite) runs() map[string]int {
	s.t.Helper()
	b, err := os.ReadFile(s.runsFile)
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	runs := map[string]int{}
	for line := range strings.Lines(string(b)) {
		if id := strings.TrimSpace(line); id != "" {
			runs[id]++
		}
	}
	return runs
}

func (s *haSite) dumpLogs(n int) {
	files, _ := filepath.Glob(filepath.Join(s.dir, "logs", "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		s.t.Logf("--- %s (last %d lines)\n%s", filepath.Base(f), len(lines), strings.Join(lines, "\n"))
	}
}

// writer is who wrote a stored message, by its Chiffon-Writer header, and when.
type writer struct {
	name string
	at   time.Time
}

// storedWriters reads every message of the task stream and returns who wrote
// each (jsstore.HeaderWriter) and when.
func (s *haSite) storedWriters(nc *nats.Conn) []writer {
	s.t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, haStream)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []writer
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // replaced since: one message per subject
		}
		if err != nil {
			s.t.Fatalf("read message %d of the task stream: %v", seq, err)
		}
		out = append(out, writer{name: m.Header.Get("Chiffon-Writer"), at: m.Time})
	}
	if len(out) == 0 {
		s.t.Fatal("the task stream holds nothing")
	}
	return out
}

// leaderName is the name the group's leadership record gives the leader, as
// orchestrator i reports it.
func (s *haSite) leaderName(i int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := s.orchs[i].client.Readiness(ctx)
	if err != nil || r.Leader == nil {
		return ""
	}
	return r.Leader.Name
}
