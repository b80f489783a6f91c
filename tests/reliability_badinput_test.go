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

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go"
)

// TestReliabilityBadInput sends bad input straight onto every subject with a raw NATS
// client, in both directions: malformed JSON, wrong types, unknown fields, envelopes
// over the size limit, and wrong and missing tokens; then a flood of 10,000 garbage
// messages. Every message with a reply subject must get the right error code, and
// the orchestrator and the agent must go on serving.
func TestReliabilityBadInput(t *testing.T) {
	c := newCluster(t, 1)
	// An embedded server whose max_payload is above the envelope limit, so that an
	// oversized envelope reaches the daemons instead of being refused by NATS.
	srv, err := broker.StartServer(broker.ServerConfig{Port: c.natsPort, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c.startOrchestrator()
	c.startAgent("code-1")

	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subj := broker.Subjects{Prefix: "chiffon"}
	orchTok, agentTok := c.tokens["orchestrator"], c.tokens["code-1"]

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
		subject string
		auth    *auth
		data    []byte
		want    errcodes.Code
	}{
		{"work: malformed JSON", subj.AgentWork("code-1"), &right, []byte(`{"type": "work_request",`), errcodes.InvalidMessage},
		{"work: wrong types", subj.AgentWork("code-1"), &right, retype(t, work, "protocol_version", 1), errcodes.InvalidMessage},
		{"work: payload wrong type", subj.AgentWork("code-1"), &right, retype(t, work, "payload", "text"), errcodes.InvalidMessage},
		{"work: unknown field", subj.AgentWork("code-1"), &right, retype(t, work, "surprise", true), errcodes.InvalidMessage},
		{"work: over the size limit", subj.AgentWork("code-1"), &right, oversized, errcodes.InvalidMessage},
		{"work: unknown work type", subj.AgentWork("code-1"), &right, unknownType, errcodes.UnsupportedWorkType},
		{"work: missing token", subj.AgentWork("code-1"), nil, work, errcodes.AuthenticationFailed},
		{"work: wrong token", subj.AgentWork("code-1"), &auth{strings.Repeat("x", 32), "code-1"}, work, errcodes.AuthenticationFailed},
		{"work: agent's own token", subj.AgentWork("code-1"), &asAgent, work, errcodes.AuthenticationFailed},
		{"control: malformed JSON", subj.AgentControl("code-1"), &right, []byte("\x00\xff"), errcodes.InvalidMessage},
		{"control: unknown field", subj.AgentControl("code-1"), &right, retype(t, ping, "extra", 1), errcodes.InvalidMessage},
		{"control: over the size limit", subj.AgentControl("code-1"), &right, oversized, errcodes.InvalidMessage},
		{"control: missing token", subj.AgentControl("code-1"), nil, ping, errcodes.AuthenticationFailed},
		{"control: wrong token", subj.AgentControl("code-1"), &auth{"nope", "code-1"}, ping, errcodes.AuthenticationFailed},
		{"register: malformed JSON", subj.Register(), &asAgent, []byte(`[1,2`), errcodes.InvalidMessage},
		{"register: wrong types", subj.Register(), &asAgent, retype(t, register, "timestamp", 12), errcodes.InvalidMessage},
		{"register: unknown field", subj.Register(), &asAgent, retype(t, register, "surprise", "x"), errcodes.InvalidMessage},
		{"register: over the size limit", subj.Register(), &asAgent, oversized, errcodes.InvalidMessage},
		{"register: missing token", subj.Register(), nil, register, errcodes.AuthenticationFailed},
		{"register: wrong token", subj.Register(), &auth{orchTok, "code-1"}, register, errcodes.AuthenticationFailed},
		{"register: unknown agent", subj.Register(), &auth{agentTok, "code-9"}, register, errcodes.AuthenticationFailed},
		{"task inbox: wrong token", subj.OrchTask("orch-rel", envelope.NewID()), &auth{"bad", "code-1"}, work, errcodes.AuthenticationFailed},
		{"task inbox: missing token", subj.OrchTask("orch-rel", envelope.NewID()), nil, work, errcodes.AuthenticationFailed},
	}
	for _, tc := range cases {
		msg := &nats.Msg{Subject: tc.subject, Data: tc.data}
		if tc.auth != nil {
			broker.SetAuth(msg, tc.auth.token, tc.auth.agentID)
		}
		resp, err := nc.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Errorf("%s: no answer: %v", tc.name, err)
			continue
		}
		rep, err := envelope.Decode(resp.Data)
		if err != nil {
			t.Errorf("%s: the answer does not decode: %v: %s", tc.name, err, resp.Data)
			continue
		}
		p, ok := rep.Payload.(*envelope.ErrorPayload)
		if !ok || errcodes.Code(p.ErrorCode) != tc.want {
			t.Errorf("%s: answered %s %s, want error %d", tc.name, rep.Type, resp.Data, tc.want)
		}
		if bytes.Contains(resp.Data, []byte(orchTok)) || bytes.Contains(resp.Data, []byte(agentTok)) {
			t.Errorf("%s: the answer holds a token", tc.name)
		}
	}

	// Messages with no reply subject are dropped; nothing to answer.
	for _, s := range []string{subj.Heartbeat(), subj.Discover(), subj.OrchTask("orch-rel", envelope.NewID())} {
		for _, a := range []*auth{nil, {"bad", "code-1"}, &asAgent, &right} {
			msg := &nats.Msg{Subject: s, Data: []byte(`{"garbage":`)}
			if a != nil {
				broker.SetAuth(msg, a.token, a.agentID)
			}
			if err := nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Over the server's own max_payload the client refuses to send.
	if err := nc.Publish(subj.AgentWork("code-1"), make([]byte, 5<<20)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("publish over max_payload: %v, want %v", err, nats.ErrMaxPayload)
	}

	flood(t, nc, subj, []string{orchTok, agentTok})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
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

// flood publishes 10,000 garbage messages on every subject the daemons read, some
// with a reply subject, some with the right tokens.
func flood(t *testing.T, nc *nats.Conn, subj broker.Subjects, tokens []string) {
	t.Helper()
	subjects := []string{subj.AgentWork("code-1"), subj.AgentControl("code-1"), subj.Register(),
		subj.Heartbeat(), subj.Discover(), subj.OrchTask("orch-rel", envelope.NewID())}
	replies := nc.NewRespInbox()
	sub, err := nc.Subscribe(replies, func(*nats.Msg) {}) // answers are not read one by one
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
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
		msg := &nats.Msg{Subject: subjects[i%len(subjects)], Data: data}
		if i%2 == 0 {
			msg.Reply = replies
		}
		if i%4 == 0 {
			broker.SetAuth(msg, tokens[i%len(tokens)], "code-1")
		}
		if err := nc.PublishMsg(msg); err != nil {
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
	task, err := c.client.Submit(ctx, orchestrator.SubmitRequest{ToAgent: "code", WorkType: "echo",
		Parameters: map[string]any{"message": "still serving"}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("echo task after the flood", 30*time.Second, func() bool {
		got, err := c.client.Get(ctx, task.ID)
		return err == nil && got.State.Final()
	})
	var out bytes.Buffer
	got, _ := c.client.Get(ctx, task.ID)
	if _, err := c.client.Output(ctx, task.ID, &out); err != nil || got.State != orchestrator.StateSucceeded || out.String() != "still serving" {
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
