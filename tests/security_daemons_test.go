package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// The security suite, continued: the message wall and the daemons. Attacks from an
// identity the broker lets in, on what it may reach.

// TestSecurityNoCredentialInAnswersToUnauthenticatedMessages sends, as each
// identity, messages that do not authenticate (no token, a wrong one, a token of
// the site valid elsewhere) to every subject that identity may publish to, and
// checks every answer: a 5004 with no Authorization header, and no token, seed or
// key anywhere in its headers or body.
func TestSecurityNoCredentialInAnswersToUnauthenticatedMessages(t *testing.T) {
	c := newCluster(t, 2)
	c.start()
	secrets := c.allSecrets()
	badTokens := func(right string) map[string]string {
		out := map[string]string{"no token": "", "a made-up token": strings.Repeat("A", 32)}
		for name, tok := range c.tokens {
			if tok != right {
				out["the token of "+name] = tok
			}
		}
		return out
	}
	type target struct {
		subject string
		claim   string // the agent id the message names
		right   string // the token that would authenticate it
		answer  bool   // a daemon subscribes and answers
	}
	type prober struct {
		id      broker.Identity
		targets []target
	}
	probes := []prober{{testerID, []target{
		{subj.AgentWork("code-1"), "code-1", c.orchToken("code-1"), true},
		{subj.AgentControl("code-1"), "code-1", c.orchToken("code-1"), true},
		{subj.AgentWork("code-2"), "code-2", c.orchToken("code-2"), true},
		{subj.AgentControl("code-2"), "code-2", c.orchToken("code-2"), true},
	}}}
	for _, self := range []string{"code-1", "code-2"} {
		p := prober{id: agentID(self)}
		for _, claim := range []string{"code-1", "code-2", "code-9"} {
			p.targets = append(p.targets,
				target{subj.Register(self), claim, c.agentToken(claim), true},
				target{subj.Heartbeat(self), claim, c.agentToken(claim), true},
				target{subj.OrchTask(clusterOrchID, self, envelope.NewID(), envelope.NewID()), claim, c.agentToken(claim), true})
		}
		p.targets = append(p.targets,
			target{"chiffon.inbox.client.tester.x.y", self, c.agentToken(self), false})
		probes = append(probes, p)
	}
	payloads := [][]byte{
		encode(t, envelope.New(envelope.Orchestrator, envelope.Code, "", "", &envelope.Ping{})),
		encode(t, envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
			SupportedVersions: envelope.SupportedVersions, MaxConcurrency: 1, HeartbeatIntervalMS: 500})),
		[]byte("garbage"),
	}
	answers, bad := 0, 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, p := range probes {
		x := c.intrude(p.id)
		for _, tg := range p.targets {
			for what, tok := range badTokens(tg.right) {
				for _, data := range payloads {
					msg := &nats.Msg{Subject: tg.subject, Data: data, Header: nats.Header{broker.HeaderAgentID: []string{tg.claim}}}
					if tok != "" {
						broker.SetAuth(msg, tok, tg.claim)
					}
					name := fmt.Sprintf("%s -> %s claiming %s with %s", x.name, tg.subject, tg.claim, what)
					resp, err := x.nc.RequestMsg(msg, 5*time.Second)
					switch {
					case !tg.answer && errors.Is(err, nats.ErrNoResponders):
						continue
					case err != nil:
						fail("%s: %v", name, err)
						continue
					case !tg.answer:
						fail("%s: answered, on a subject no daemon should answer", name)
					}
					answers++
					for _, problem := range answerProblems(resp, secrets) {
						fail("%s: %s", name, problem)
					}
				}
			}
		}
		if err := x.nc.LastError(); err != nil {
			fail("%s: %v: the probes went where the identity may publish", x.name, err)
		}
	}
	t.Logf("%d answers to unauthenticated messages checked, %d failures", answers, bad)
	c.assertNoTokenLogged()
}

// TestSecurityForgedTaskMessagesChangeNothing: while a task of code-1 waits for its
// acknowledgement, and again while it runs, agent code-2's identity and the tester
// client forge its result, a status and "no responders" on every task inbox they
// can reach (and are refused code-1's), the tester has code-1 answer a request of
// its own onto the task's inbox pattern, and code-1's own identity, used by another
// process than the one the attempt went to, forges "no responders" with a made-up
// nonce. The task must run once, succeed with its real output, keep its one
// attempt, and leave every breaker closed.
func TestSecurityForgedTaskMessagesChangeNothing(t *testing.T) {
	c := newCluster(t, 2)
	// code-2 does not run: its identity is the attacker's, and every task goes
	// to code-1.
	c.startBroker()
	c.startOrchestrator()
	c.startAgent("code-1")
	f := forgers{c: c, code1: c.intrude(agentID("code-1")), code2: c.intrude(agentID("code-2")), client: c.intrude(testerID)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// While dispatched: code-1 is stopped, so the task waits for its ack (up to
	// relAck) and a "no responders" would still count, were it believed.
	agent := c.agents["code-1"]
	agent.suspend(t)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = agent.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 1, "sleep": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("task dispatched", relAck, func() bool {
		got, err := c.client.Get(ctx, tsk.ID)
		return err == nil && got.State == task.StateDispatched
	})
	f.forge(tsk)
	got, err := c.client.Get(ctx, tsk.ID)
	resume()
	if err != nil {
		t.Fatal(err)
	}
	if got.State != task.StateDispatched || got.Attempts != 1 {
		t.Errorf("dispatched task after the forgeries: %s, attempt %d, retries %+v; want still dispatched at its first attempt",
			got.State, got.Attempts, got.Retries)
	}
	c.assertBreakersClosed(ctx)
	c.assertRealOutcome(ctx, tsk, 1)

	// While running.
	tsk, err = c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 2, "sleep": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("task running", 30*time.Second, func() bool {
		got, err := c.client.Get(ctx, tsk.ID)
		return err == nil && got.State == task.StateRunning
	})
	f.forge(tsk)
	if got, err := c.client.Get(ctx, tsk.ID); err != nil {
		t.Fatal(err)
	} else if got.State != task.StateRunning || got.ProgressPercent == 99 {
		t.Errorf("running task after the forgeries: %s at %d%%, attempt %d; want still running, not at the forged 99%%",
			got.State, got.ProgressPercent, got.Attempts)
	}
	c.assertRealOutcome(ctx, tsk, 2)
	c.assertNoTokenLogged()
}

func TestSecurityDuplicateAgentIDIsRefused(t *testing.T) {
	c := newCluster(t, 1)
	c.start()
	const n = 40
	ids := c.submitAll(n, sleepEvery(2, "0.3"))

	// A second process with code-1's config (and so its identity and tokens), but
	// its own data dir, while code-1 runs the batch.
	dup := c.spawn("code-1-second", nil, "agent", "--config", filepath.Join(c.dir, "code-1.yaml"),
		"--data-dir", filepath.Join(c.dir, "data", "code-1-second"))
	code, log := c.exitOf(dup, 30*time.Second)
	if code == 0 || !strings.Contains(log, "registration refused") || !strings.Contains(log, errcodes.TokenInstanceLive) {
		t.Errorf("second code-1: exit %d; want non-zero, with registration refused (%s) in its output:\n%s",
			code, errcodes.TokenInstanceLive, log)
	}

	w := &watch{c: c, total: n}
	c.waitFor("the batch finished", 2*time.Minute, func() bool { return w.finished() == n })
	rep := report{byState: map[string]int{}}
	c.verify(t, scenario{bound: time.Minute}, ids, &rep) // every task succeeded, and ran exactly once
	if rep.byState[string(task.StateSucceeded)] != n {
		t.Errorf("by state %v, want %d succeeded", rep.byState, n)
	}
	if runs := c.runs(); len(runs) != n {
		t.Errorf("the runs file names %d requests, want %d", len(runs), n)
	}
	// The first process still serves.
	c.waitAgentOnline("code-1", time.Now())
	if !c.agents["code-1"].alive() {
		t.Error("code-1 died")
	}
	c.assertNoTokenLogged()
}

func TestSecurityAgentIDIsBoundToItsType(t *testing.T) {
	c := newCluster(t, 1)
	c.startBroker()
	c.startOrchestrator()
	// code-1's own identity and tokens, registering as an infra agent.
	c.writeAgentConfigAs("code-1-as-infra.yaml", "code-1", "infra", `  uptime:
    description: How long the host has been up (an infra work type).
    command: [uptime]
`)
	p := c.spawn("code-1-as-infra", nil, "agent", "--config", filepath.Join(c.dir, "code-1-as-infra.yaml"))
	code, log := c.exitOf(p, 30*time.Second)
	if code == 0 || !strings.Contains(log, "registration refused") || !strings.Contains(log, errcodes.TokenWrongType) ||
		!strings.Contains(log, "5004") {
		t.Errorf("code-1 as infra: exit %d; want non-zero with a 5004 %s registration refusal:\n%s", code, errcodes.TokenWrongType, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as, err := c.client.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.ID == "code-1" && (a.State == "online" || a.Type == envelope.Infra) {
			t.Errorf("code-1 after registering as infra: %+v", a)
		}
	}
	// code-1 as what it is registers.
	c.startAgent("code-1")
	as, err = c.client.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.ID == "code-1" && a.Type != envelope.Code {
			t.Errorf("code-1 registered as %s", a.Type)
		}
	}
	c.assertNoTokenLogged()
}

func TestSecuritySubprocessGuardsRefuseInjection(t *testing.T) {
	c := newCluster(t, 1)
	base := filepath.Join(c.dir, "repos")
	for _, d := range []string{filepath.Join(base, "ok"), filepath.Join(c.dir, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(c.dir, "outside"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	c.extraWorkTypes = fmt.Sprintf(`  opt:
    command: [echo, "{{.arg}}"]
  inrepo:
    command: [pwd]
    dir: "%s/{{.repo}}"
  params:
    shell: env | grep '^CHIFFON_PARAM_' | sort
    schema:
      type: object
      properties:
        declared: {type: string}
`, base)
	c.writeAgentConfig("code-1")
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		workType string
		params   map[string]any
		// exit is the exit code wanted; 0 wants success with output out exactly,
		// and otherwise a failure whose output holds out.
		exit int
		out  string
	}{
		{"a plain argument", "opt", map[string]any{"arg": "hello"}, 0, "hello\n"},
		{"an argument that is an option", "opt", map[string]any{"arg": "--help"}, 2, "would be an option"},
		{"an option with a value", "opt", map[string]any{"arg": "--output=" + filepath.Join(c.dir, "pwned")}, 2, "would be an option"},
		{"a short option", "opt", map[string]any{"arg": "-n"}, 2, "would be an option"},
		{"a dir under the base", "inrepo", map[string]any{"repo": "ok"}, 0, filepath.Join(realBase, "ok") + "\n"},
		{"a dir that climbs out", "inrepo", map[string]any{"repo": "../outside"}, 2, "is not under"},
		{"a dir that climbs out from inside", "inrepo", map[string]any{"repo": "ok/../../.."}, 2, "is not under"},
		{"a dir that is a symlink out", "inrepo", map[string]any{"repo": "link"}, 2, "is not under"},
		{"declared and undeclared parameters", "params", map[string]any{"declared": "yes", "x": "leak", "sneaky": "leak"}, 0,
			"CHIFFON_PARAM_DECLARED=yes\n"},
	} {
		tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: tc.workType, Parameters: tc.params})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := c.waitTask(ctx, tsk.ID)
		out := c.output(ctx, tsk.ID)
		exit := -1
		if got.Result != nil {
			exit = int(got.Result.ExitCode)
		}
		switch {
		case tc.exit == 0 && (got.State != task.StateSucceeded || out != tc.out):
			t.Errorf("%s: %s (exit %d), output %q; want succeeded with %q", tc.name, got.State, exit, out, tc.out)
		case tc.exit != 0 && (got.State != task.StateFailed || exit != tc.exit || !strings.Contains(out, tc.out)):
			t.Errorf("%s: %s (exit %d), output %q; want failed with exit %d saying %q", tc.name, got.State, exit, out, tc.exit, tc.out)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dir, "pwned")); err == nil {
		t.Error("an option from a parameter wrote a file")
	}
	c.assertNoTokenLogged()
}

func TestSecurityRunAsCannotReadAgentKeys(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run_as needs the agent to run as root to switch users; this test runs as uid", os.Geteuid())
	}
	c := newCluster(t, 1)
	seed := c.secret("agent-code-1.nk")
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("no user nobody to run as: %v", err)
	}
	c.extraWorkTypes = fmt.Sprintf(`  readkey:
    shell: id -u; cat %[1]s
    dir: /
    run_as: nobody
  readkey_as_agent:
    shell: id -u; cat %[1]s
    dir: /
`, seed)
	c.writeAgentConfig("code-1")
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(workType string) (*task.Task, string) {
		tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: workType})
		if err != nil {
			t.Fatal(err)
		}
		got := c.waitTask(ctx, tsk.ID)
		return got, c.output(ctx, tsk.ID)
	}
	// As the agent's own user, a task reads the key: what run_as is for.
	if got, out := run("readkey_as_agent"); got.State != task.StateSucceeded || !strings.Contains(out, c.seeds["agent-code-1.nk"]) {
		t.Fatalf("readkey as the agent: %s, output %q; the test cannot tell a refused read", got.State, out)
	}
	got, out := run("readkey")
	if strings.Contains(out, c.seeds["agent-code-1.nk"]) {
		t.Fatal("a run_as task read the agent's NKey seed")
	}
	if got.State != task.StateFailed || !strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "Permission denied") {
		t.Errorf("readkey as nobody: %s, output %q; want failed, run as 65534, permission denied", got.State, out)
	}
}

func TestSecurityOversizedSubmitIsRefusedWith413(t *testing.T) {
	c := newCluster(t, 1)
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := c.client.List(ctx, api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size int
		says string
	}{
		// Fits the API's body limit, but its work_request does not fit the
		// broker's max_payload.
		{"an envelope over max_payload", 1<<20 - 200, "over the limit of"},
		// Larger than max_payload itself.
		{"a parameter over max_payload", 2 << 20, "1048576"},
	} {
		body := fmt.Sprintf(`{"to_agent":"code","work_type":"echo","parameters":{"message":%q}}`, strings.Repeat("x", tc.size))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.httpAddr+"/api/v1/tasks", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.tokens["api.token"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(answer.Error.Message, tc.says) {
			t.Errorf("%s: %s %+v; want 413 naming the limit", tc.name, resp.Status, answer)
		}
	}
	// Nothing was stored nor sent, and so nothing failed.
	after, err := c.client.List(ctx, api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("%d tasks after the refused submits, %d before", len(after), len(before))
	}
	c.assertBreakersClosed(ctx)
	assertServing(t, c)
}
