package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// The security suite of issue 12. Each test replays an attack that worked against
// an open Chiffon, against the built binary and a broker loaded from the
// broker.conf `chiffon init` wrote (newCluster), as an attacker who holds one
// identity's files (an agent host, a scripting client) or none (the LAN).

func TestSecurityAnonymousClientCannotConnect(t *testing.T) {
	c := newCluster(t, 1)
	c.startBroker()

	// The broker says, before anything else, that it wants TLS and an identity,
	// and refuses a client that goes on in plain text.
	conn, err := net.DialTimeout("tcp", c.natsAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	var info struct {
		TLSRequired  bool `json:"tls_required"`
		AuthRequired bool `json:"auth_required"`
	}
	if err != nil || !strings.HasPrefix(line, "INFO ") || json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info) != nil {
		t.Fatalf("first line from the broker: %q, %v", line, err)
	}
	if !info.TLSRequired || !info.AuthRequired {
		t.Errorf("the broker announces tls_required %v, auth_required %v; want both", info.TLSRequired, info.AuthRequired)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\nSUB > 1\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if rest, _ := rd.ReadString('\n'); strings.HasPrefix(rest, "PONG") {
		t.Errorf("the broker answered a plain-text client: %q", rest)
	}

	stranger := filepath.Join(t.TempDir(), "stranger.nk")
	if _, err := broker.EnsureNKeySeed(stranger); err != nil {
		t.Fatal(err)
	}
	ca := c.secret("ca.pem")
	for _, tc := range []struct {
		name string
		dial func() (*nats.Conn, error)
	}{
		{"TLS, no identity", func() (*nats.Conn, error) { return c.dialAs("", ca, "") }},
		{"TLS without checking the certificate, no identity", func() (*nats.Conn, error) {
			return nats.Connect(c.natsURL(), nats.Secure(&tls.Config{InsecureSkipVerify: true}), nats.NoReconnect())
		}},
		{"a user name and password", func() (*nats.Conn, error) {
			return c.dialAs("", ca, "", nats.UserInfo("orchestrator", c.tokens["api.token"]))
		}},
		{"a token", func() (*nats.Conn, error) { return c.dialAs("", ca, "", nats.Token(c.tokens["api.token"])) }},
		{"an NKey broker.conf does not list", func() (*nats.Conn, error) { return c.dialAs(stranger, ca, "") }},
	} {
		nc, err := tc.dial()
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", tc.name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization violation", tc.name, err)
		}
	}
	// Chiffon's own client says what is missing instead of retrying forever.
	if nc, err := broker.Connect(broker.ConnConfig{URLs: []string{c.natsURL()}, TLS: broker.ClientTLS{CAFile: ca}}); err == nil {
		nc.Close()
		t.Error("broker.Connect without an identity connected")
	} else if !strings.Contains(err.Error(), "requires an identity") {
		t.Errorf("broker.Connect without an identity: %v, want it to say an identity is required", err)
	}
	// And with an identity of the site, the same dial works.
	nc, err := c.dialAs(c.secret("agent-code-1.nk"), ca, subj.InboxOf(agentID("code-1")))
	if err != nil {
		t.Fatalf("code-1's identity cannot connect: %v", err)
	}
	nc.Close()
}

func TestSecurityWrongCAIsRefused(t *testing.T) {
	c := newCluster(t, 1)
	c.startBroker()
	otherCA, _, err := broker.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// A client that trusts another CA does not talk to the site's broker.
	nc, err := c.dialAs(c.secret("agent-code-1.nk"), otherCA, subj.InboxOf(agentID("code-1")))
	if err == nil {
		nc.Close()
		t.Error("a client trusting another CA connected")
	} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a client trusting another CA: %v, want the certificate refused", err)
	}

	// Nor does a daemon of the site talk to an impostor broker whose certificate
	// another CA signed, even one that accepts its NKey: it would hand the
	// impostor every token in its messages.
	pub, err := broker.EnsureNKeySeed(c.secret("agent-code-1.nk"))
	if err != nil {
		t.Fatal(err)
	}
	impostor := testnats.StartSecure(t, []broker.User{{Name: "code-1", NKey: pub, Publish: []string{">"}, Subscribe: []string{">"}}})
	if nc, err := broker.Connect(broker.ConnConfig{URLs: []string{impostor.ClientURL()},
		NKeyFile: c.secret("agent-code-1.nk"), TLS: broker.ClientTLS{CAFile: c.secret("ca.pem")}}); err == nil {
		nc.Close()
		t.Error("code-1's identity connected to a broker with another CA's certificate")
	} else if !strings.Contains(err.Error(), "tls.ca_file") {
		t.Errorf("connect to an impostor broker: %v, want an error naming tls.ca_file", err)
	}

	// An agent configured with the wrong CA stops at once and says why.
	cfg, err := os.ReadFile(filepath.Join(c.dir, "code-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.write("code-1-wrong-ca.yaml", strings.Replace(string(cfg), c.secret("ca.pem"), otherCA, 1))
	p := c.spawn("code-1-wrong-ca", nil, "agent", "--config", filepath.Join(c.dir, "code-1-wrong-ca.yaml"))
	code, log := c.exitOf(p, 30*time.Second)
	if code == 0 || !strings.Contains(log, "tls.ca_file") {
		t.Errorf("agent trusting another CA: exit %d, want non-zero with a message naming tls.ca_file:\n%s", code, log)
	}
}

func TestSecurityAgentCannotReachBeyondItsSubjects(t *testing.T) {
	c := newCluster(t, 2)
	c.start()
	x := c.intrude(agentID("code-1"))
	orchTask := func(agent string) string {
		return subj.OrchTask(clusterOrchID, agent, envelope.NewID(), envelope.NewID())
	}

	// What code-1 needs, it may do: the check below tells refused from allowed.
	x.allowed("Subscription", "chiffon.inbox.agent.code-1.x", func() error {
		_, err := x.nc.SubscribeSync("chiffon.inbox.agent.code-1.x")
		return err
	})
	x.allowed("Publish", orchTask("code-1"), func() error { return x.nc.Publish(orchTask("code-1"), []byte("{}")) })
	ownReply := subj.ControlReplies("code-1") + ".x"
	x.allowed("Publish", ownReply, func() error { return x.nc.Publish(ownReply, []byte("{}")) })

	// It may read nothing that is not for it: not every subject, not another
	// agent's work and control, not the registry (heartbeats carry tokens), not
	// the orchestrator's inbox or task inboxes, not another identity's replies.
	got := make(chan *nats.Msg, 1024)
	for _, s := range []string{
		">", "chiffon.>", "chiffon.*.>", "chiffon.agent.>", "chiffon.agent.code-2.work", "chiffon.agent.code-2.control",
		"chiffon.agent.*.work", "chiffon.agent.*.control", "chiffon.agent.code-2.*",
		"chiffon.registry.register.*", "chiffon.registry.heartbeat.*", "chiffon.registry.>", subj.Register("code-2"),
		"chiffon.inbox.>", "chiffon.inbox.orch.>", "chiffon.inbox.agent.code-2.>", "chiffon.inbox.agent.*.>",
		subj.ControlReplies("code-1") + ".>", "chiffon.inbox.store.>", "chiffon.store.>",
		"chiffon.inbox.client.tester.>", "chiffon.orch.>", "chiffon.orch.*.task.>",
		"chiffon.orch." + clusterOrchID + ".task.code-2.>", "chiffon.orch." + clusterOrchID + ".task.code-1.>",
		"_INBOX.>",
	} {
		x.refused("Subscription", s, func() error {
			_, err := x.nc.ChanSubscribe(s, got)
			return err
		})
	}
	// Nor command another agent, or itself, or speak for another agent.
	work := envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "count", Parameters: map[string]any{"n": 1}})
	for _, s := range []string{subj.AgentWork("code-2"), subj.AgentControl("code-2"), subj.AgentWork("code-1"),
		subj.AgentControl("code-1"), orchTask("code-2"), "chiffon.inbox.agent.code-2.x",
		// Nor register or heartbeat as another agent, answer in another's place
		// or the orchestrators', or touch the task store.
		subj.Register("code-2"), subj.Heartbeat("code-2"), subj.ControlReplies("code-2") + ".x",
		subj.ForwardReplies() + ".x", "chiffon.inbox.orch.x.y", "chiffon.inbox.store.x",
		"chiffon.store.leader", "$JS.API.INFO"} {
		x.publishRefused(signed(t, s, work, c.agentToken("code-1"), "code-1"))
	}

	// Work flows past it meanwhile, and none of it reaches code-1's intruder.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 4 {
		tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.waitTask(ctx, tsk.ID); got.State != task.StateSucceeded {
			t.Fatalf("task %d: %s", i, got.State)
		}
	}
	if err := x.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(got); n > 0 {
		m := <-got
		t.Errorf("code-1's intruder received %d messages, the first on %s", n, m.Subject)
	}
	c.assertNoTokenLogged()
}

// TestSecuritySiteKeepsEveryRequestReplyFlow runs, under the permissions chiffon
// init generated, the flows least privilege must not break: registration and
// heartbeats (startAgent), the orchestrator's cancel and its discover after a
// restart, and a client's ping, work and drain answered on the client's own inbox
// by the agent, whose answers carry the agent's token.
func TestSecuritySiteKeepsEveryRequestReplyFlow(t *testing.T) {
	c := newCluster(t, 1)
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "hang", Parameters: map[string]any{"seconds": 60}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("task running", 30*time.Second, func() bool {
		got, err := c.client.Get(ctx, tsk.ID)
		return err == nil && got.State == task.StateRunning
	})
	if _, err := c.client.Cancel(ctx, tsk.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := c.waitTask(ctx, tsk.ID); got.State != task.StateCancelled {
		t.Errorf("cancelled task: %s", got.State)
	}
	since := time.Now()
	restartOrchestrator(c) // its discover makes the agent register again
	c.waitAgentOnline("code-1", since)

	// A client's ping, work and drain, each answered on the client's inbox.
	nc := c.connect(testerID)
	control := func(p envelope.Payload) {
		t.Helper()
		msg := signed(t, subj.AgentControl("code-1"), envelope.New(envelope.Orchestrator, envelope.Code, "", "", p), c.orchToken("code-1"), "code-1")
		resp, err := nc.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Fatalf("%T from the client: %v", p, err)
		}
		if ack, ok := c.agentAnswer(resp).Payload.(*envelope.ControlAck); !ok || !ack.OK {
			t.Errorf("%T from the client: answered %s", p, resp.Data)
		}
	}
	control(&envelope.Ping{})
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	msg := signed(t, subj.AgentWork("code-1"), envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "echo", Parameters: map[string]any{"message": "from a client"}}),
		c.orchToken("code-1"), "code-1")
	msg.Reply = inbox
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; { // statuses, then the result
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("the client's work: %v", err)
		}
		var res *envelope.WorkResult
		if res, done = c.agentAnswer(m).Payload.(*envelope.WorkResult); done && (res.Status != envelope.ResultSuccess || res.Output != "from a client") {
			t.Errorf("the client's work: %+v", res)
		}
	}
	control(&envelope.Drain{TimeoutSeconds: 60})
	c.waitFor("code-1 draining", 10*time.Second, func() bool {
		as, err := c.client.Agents(ctx)
		for _, a := range as {
			if err == nil && a.ID == "code-1" && a.Status == "draining" {
				return true
			}
		}
		return false
	})
	if err := nc.LastError(); err != nil {
		t.Errorf("the client: %v", err)
	}
	c.assertNoTokenLogged()
}

// agentAnswer decodes msg, an answer of agent code-1, failing the test unless it
// carries code-1's token.
func (c *cluster) agentAnswer(msg *nats.Msg) *envelope.Envelope {
	c.t.Helper()
	if err := broker.CheckAuth(msg, c.agentToken("code-1")); err != nil {
		c.t.Fatalf("an answer on %s without code-1's token: %v", msg.Subject, err)
	}
	env, err := envelope.Decode(msg.Data)
	if err != nil {
		c.t.Fatalf("an answer on %s: %v", msg.Subject, err)
	}
	return env
}
