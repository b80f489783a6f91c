package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// TestReliabilityBadInput sends bad input straight onto every subject with a raw NATS
// client, in both directions: malformed JSON, wrong types, unknown fields, envelopes
// over the size limit, and wrong and missing tokens; then a flood of 10,000 garbage
// messages. It sends as the identities broker.conf allows there: work and control
// as the tester client, registrations, heartbeats and task messages as agent
// code-1. Every message with a reply subject must get the right error code, no
// answer may hold a secret, an answer to an unauthenticated message must carry no
// Authorization header at all, and the orchestrator and the agent must go on
// serving.
func TestReliabilityBadInput(t *testing.T) {
	c := newCluster(t, 1)
	// The broker of the site's broker.conf, with a max_payload above the envelope
	// limit, so that an oversized envelope reaches the daemons instead of being
	// refused by NATS.
	srv, err := broker.StartServer(broker.ServerConfig{ConfigFile: c.brokerConf(), Port: c.natsPort, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c.startOrchestrator()
	c.startAgent("code-1")

	tester, asCode1 := c.connect(testerID), c.connect(agentID("code-1"))
	orchTok, agentTok := c.orchToken("code-1"), c.agentToken("code-1")
	taskInbox := func() string { return subj.OrchTask(clusterOrchID, "code-1", envelope.NewID(), envelope.NewID()) }

	// Valid envelopes of each type, and damaged copies of them.
	ping := encode(t, envelope.New(envelope.Orchestrator, envelope.Code, "", "", &envelope.Ping{}))
	work := encode(t, envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "echo", Parameters: map[string]any{"message": "hi"}}))
	register := encode(t, envelope.New(envelope.Code, envelope.Orchestrator, "", "",
		&envelope.Register{AgentID: "code-1", SupportedVersions: []string{envelope.ProtocolVersion}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 1000}))
	unknownType := encode(t, envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "no_such_type"}))
	oversized := encode(t, envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: "echo", Parameters: map[string]any{"message": strings.Repeat("x", 2<<20)}}))

	type auth struct{ token, agentID string }
	right := auth{orchTok, "code-1"}
	asAgent := auth{agentTok, "code-1"}
	cases := []struct {
		name    string
		nc      *nats.Conn
		subject string
		auth    *auth
		data    []byte
		want    errcodes.Code
	}{
		{"work: malformed JSON", tester, subj.AgentWork("code-1"), &right, []byte(`{"type": "work_request",`), errcodes.InvalidMessage},
		{"work: wrong types", tester, subj.AgentWork("code-1"), &right, retype(t, work, "protocol_version", 1), errcodes.InvalidMessage},
		{"work: payload wrong type", tester, subj.AgentWork("code-1"), &right, retype(t, work, "payload", "text"), errcodes.InvalidMessage},
		{"work: unknown field", tester, subj.AgentWork("code-1"), &right, retype(t, work, "surprise", true), errcodes.InvalidMessage},
		{"work: over the size limit", tester, subj.AgentWork("code-1"), &right, oversized, errcodes.InvalidMessage},
		{"work: unknown work type", tester, subj.AgentWork("code-1"), &right, unknownType, errcodes.UnsupportedWorkType},
		{"work: missing token", tester, subj.AgentWork("code-1"), nil, work, errcodes.AuthenticationFailed},
		{"work: wrong token", tester, subj.AgentWork("code-1"), &auth{strings.Repeat("x", 32), "code-1"}, work, errcodes.AuthenticationFailed},
		{"work: agent's own token", tester, subj.AgentWork("code-1"), &asAgent, work, errcodes.AuthenticationFailed},
		{"work: the API token", tester, subj.AgentWork("code-1"), &auth{c.tokens["api.token"], "code-1"}, work, errcodes.AuthenticationFailed},
		{"control: malformed JSON", tester, subj.AgentControl("code-1"), &right, []byte("\x00\xff"), errcodes.InvalidMessage},
		{"control: unknown field", tester, subj.AgentControl("code-1"), &right, retype(t, ping, "extra", 1), errcodes.InvalidMessage},
		{"control: over the size limit", tester, subj.AgentControl("code-1"), &right, oversized, errcodes.InvalidMessage},
		{"control: missing token", tester, subj.AgentControl("code-1"), nil, ping, errcodes.AuthenticationFailed},
		{"control: wrong token", tester, subj.AgentControl("code-1"), &auth{"nope", "code-1"}, ping, errcodes.AuthenticationFailed},
		{"register: malformed JSON", asCode1, subj.Register("code-1"), &asAgent, []byte(`[1,2`), errcodes.InvalidMessage},
		{"register: wrong types", asCode1, subj.Register("code-1"), &asAgent, retype(t, register, "timestamp", 12), errcodes.InvalidMessage},
		{"register: unknown field", asCode1, subj.Register("code-1"), &asAgent, retype(t, register, "surprise", "x"), errcodes.InvalidMessage},
		{"register: over the size limit", asCode1, subj.Register("code-1"), &asAgent, oversized, errcodes.InvalidMessage},
		{"register: missing token", asCode1, subj.Register("code-1"), nil, register, errcodes.AuthenticationFailed},
		{"register: wrong token", asCode1, subj.Register("code-1"), &auth{orchTok, "code-1"}, register, errcodes.AuthenticationFailed},
		{"register: unknown agent", asCode1, subj.Register("code-1"), &auth{agentTok, "code-9"}, register, errcodes.AuthenticationFailed},
		{"task inbox: wrong token", asCode1, taskInbox(), &auth{"bad", "code-1"}, work, errcodes.AuthenticationFailed},
		{"task inbox: missing token", asCode1, taskInbox(), nil, work, errcodes.AuthenticationFailed},
	}
	secrets := c.allSecrets()
	for _, tc := range cases {
		msg := &nats.Msg{Subject: tc.subject, Data: tc.data}
		if tc.auth != nil {
			broker.SetAuth(msg, tc.auth.token, tc.auth.agentID)
		}
		resp, err := tc.nc.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Errorf("%s: no answer: %v", tc.name, err)
			continue
		}
		if tc.want == errcodes.AuthenticationFailed {
			// Nobody vouched for the sender: the answer is a 5004 that carries no
			// credential, and no Authorization header at all.
			for _, problem := range answerProblems(resp, secrets) {
				t.Errorf("%s: %s", tc.name, problem)
			}
			continue
		}
		rep, err := envelope.Decode(resp.Data)
		if err != nil {
			t.Errorf("%s: the answer does not decode: %v: %s", tc.name, err, resp.Data)
			continue
		}
		if p, ok := rep.Payload.(*envelope.ErrorPayload); !ok || errcodes.Code(p.ErrorCode) != tc.want {
			t.Errorf("%s: answered %s %s, want error %d", tc.name, rep.Type, resp.Data, tc.want)
		}
		for name, secret := range secrets {
			if bytes.Contains(resp.Data, []byte(secret)) {
				t.Errorf("%s: the answer holds the secret of %s", tc.name, name)
			}
		}
		// An authenticated sender may get the replier's token for code-1, nothing else.
		if name := headerSecret(resp.Header, without(secrets, "agent-code-1.token", "agent-code-1.orchestrator.token")); name != "" {
			t.Errorf("%s: a header of the answer holds the secret of %s", tc.name, name)
		}
	}

	// Messages with no reply subject are dropped; nothing to answer.
	for _, target := range []struct {
		nc      *nats.Conn
		subject string
	}{{asCode1, subj.Heartbeat("code-1")}, {asCode1, taskInbox()}, {tester, subj.AgentControl("code-1")}, {tester, subj.AgentWork("code-1")}} {
		for _, a := range []*auth{nil, {"bad", "code-1"}, &asAgent, &right} {
			msg := &nats.Msg{Subject: target.subject, Data: []byte(`{"garbage":`)}
			if a != nil {
				broker.SetAuth(msg, a.token, a.agentID)
			}
			if err := target.nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Over the server's own max_payload the client refuses to send.
	if err := tester.Publish(subj.AgentWork("code-1"), make([]byte, 5<<20)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("publish over max_payload: %v, want %v", err, nats.ErrMaxPayload)
	}

	flood(t, []floodTarget{
		{tester, subj.AgentWork("code-1")}, {tester, subj.AgentControl("code-1")},
		{asCode1, subj.Register("code-1")}, {asCode1, subj.Heartbeat("code-1")}, {asCode1, taskInbox()},
	}, []string{orchTok, agentTok})
	for _, nc := range []*nats.Conn{tester, asCode1} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		// Each message went where its identity may publish: the broker refused none.
		if err := nc.LastError(); err != nil {
			t.Errorf("%s: %v", nc.Opts.Name, err)
		}
	}
	assertServing(t, c)
	m, err := c.metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m["chiffon_orchestrator_auth_failures_total"] < 5 || m["chiffon_orchestrator_invalid_messages_total"] < 1 {
		t.Errorf("auth failures %v, invalid messages %v: refused messages are not counted",
			m["chiffon_orchestrator_auth_failures_total"], m["chiffon_orchestrator_invalid_messages_total"])
	}
	c.assertNoTokenLogged()
}

// floodTarget is a subject and the connection, of an identity allowed to publish
// there, that floods it.
type floodTarget struct {
	nc      *nats.Conn
	subject string
}

// flood publishes 10,000 garbage messages across targets, some with a reply
// subject in the sender's own inbox, some with the right tokens.
func flood(t *testing.T, targets []floodTarget, tokens []string) {
	t.Helper()
	replies := map[*nats.Conn]string{}
	for _, tg := range targets {
		if _, ok := replies[tg.nc]; ok {
			continue
		}
		replies[tg.nc] = tg.nc.NewRespInbox()
		sub, err := tg.nc.Subscribe(replies[tg.nc], func(*nats.Msg) {}) // answers are not read one by one
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		data := make([]byte, rng.IntN(512))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		if i%3 == 0 { // something that looks like an envelope
			data = fmt.Appendf(nil, `{"protocol_version":"1.0","type":%q,"payload":{"x":%d}}`,
				[]string{"work_request", "ping", "register", "heartbeat", "work_result"}[i%5], i)
		}
		tg := targets[rng.IntN(len(targets))]
		msg := &nats.Msg{Subject: tg.subject, Data: data}
		if i%2 == 0 {
			msg.Reply = replies[tg.nc]
		}
		if i%4 == 0 {
			broker.SetAuth(msg, tokens[i%len(tokens)], "code-1")
		}
		if err := tg.nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
}

// assertServing checks that the orchestrator and the agent still do their work: the
// agent is online and an echo task succeeds.
func assertServing(t *testing.T, c *cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "echo",
		Parameters: map[string]any{"message": "still serving"}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("echo task after the flood", 30*time.Second, func() bool {
		got, err := c.client.Get(ctx, tsk.ID)
		return err == nil && got.State.Final()
	})
	var out bytes.Buffer
	got, _ := c.client.Get(ctx, tsk.ID)
	if _, err := c.client.Output(ctx, tsk.ID, &out); err != nil || got.State != task.StateSucceeded || out.String() != "still serving" {
		t.Errorf("echo after the flood: %s, output %q, %v", got.State, out.String(), err)
	}
	if !c.orch.alive() || !c.agents["code-1"].alive() {
		t.Fatal("a daemon died")
	}
}

func encode(t *testing.T, env *envelope.Envelope) []byte {
	t.Helper()
	b, err := envelope.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// retype returns the envelope JSON b with its top-level key set to v.
func retype(t *testing.T, b []byte, key string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = v
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
