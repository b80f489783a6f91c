package orchestrator_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// TestOrchestratorAnswersOnlyIntoTheSendersInbox: a message to the orchestrator
// whose reply subject is not its sender's inbox gets no answer, whatever it is
// (a registration or a heartbeat, with a good token or none, on the task inbox
// of a running task), so that nobody can make the orchestrator publish where it
// may and the sender may not: another agent's control subject, the JetStream
// store's leader key or a record. The broker is open here, so this is the
// orchestrator's own wall; each case then sends a refused message with the
// reply in the sender's inbox, whose answer shows the one before was handled.
func TestOrchestratorAnswersOnlyIntoTheSendersInbox(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	o, a := e.openWithAgent("code-1", 1)
	tsk, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	w := a.next()
	subj := broker.Subjects{}

	// A watcher on every subject an answer must not reach.
	watcher := testnats.Connect(t, e.srv)
	leaked := make(chan *nats.Msg, 64)
	targets := []string{subj.AgentControl("code-2"), subj.Store() + ".leader", subj.Store() + ".r.schedule.nightly",
		subj.Store() + ".t." + tsk.ID, subj.InboxOf(broker.Identity{Role: broker.RoleAgent, Name: "code-2"}) + ".x.y",
		subj.ForwardReplies() + ".x", "_INBOX.x.y"}
	for _, s := range targets {
		if _, err := watcher.ChanSubscribe(s, leaked); err != nil {
			t.Fatal(err)
		}
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	register, _ := envelope.Encode(envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: []string{"1.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 60000}))
	heartbeat, _ := envelope.Encode(envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Heartbeat{AgentID: "code-1",
		Status: envelope.AgentIdle, MaxConcurrency: 1}))
	status, _ := envelope.Encode(w.env.Reply(&envelope.WorkStatus{TaskID: w.req.TaskID, Status: envelope.StatusRunning}))
	cases := []struct {
		name, subject string
		data          []byte
	}{
		{"registration", subj.Register("code-1"), register},
		{"heartbeat", subj.Heartbeat("code-1"), heartbeat},
		{"task message", w.reply, status},
	}
	tokens := map[string]string{"no token": "", "a wrong token": broker.NewToken(), "code-1's token": e.tokens["code-1"],
		"code-2's token": e.tokens["code-2"]}
	for _, tc := range cases {
		for what, tok := range tokens {
			for _, reply := range targets {
				msg := &nats.Msg{Subject: tc.subject, Reply: reply, Data: tc.data, Header: nats.Header{}}
				if tok != "" {
					claim := "code-1"
					if tok == e.tokens["code-2"] {
						claim = "code-2"
					}
					broker.SetAuth(msg, tok, claim)
				}
				if err := a.nc.PublishMsg(msg); err != nil {
					t.Fatal(err)
				}
			}
			// The marker: refused, with its reply in code-1's inbox, so answered.
			marker := &nats.Msg{Subject: tc.subject, Data: tc.data}
			if _, err := a.nc.RequestMsg(marker, wait); err != nil {
				t.Fatalf("%s with %s: the marker was not answered: %v", tc.name, what, err)
			}
			select {
			case m := <-leaked:
				t.Errorf("%s with %s and reply %s: the orchestrator published there", tc.name, what, m.Subject)
			default:
			}
		}
	}
	// The task was not disturbed.
	a.ack(w)
	a.result(w, envelope.ResultSuccess, 0, "done", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("task %s", final.State)
	}
	c := e.client(o)
	if _, m := call(t, c, "GET", "/metrics", "", ""); !strings.Contains(m, "chiffon_orchestrator_foreign_replies_total") ||
		strings.Contains(m, "chiffon_orchestrator_foreign_replies_total 0\n") {
		t.Error("messages left unanswered are not counted")
	}
}

// TestStandbyBelievesOnlySignedForwardedAnswers: an answer to a forwarded
// request that lacks the group's signature, bears one made with another key, or
// bears the signature of another answer is refused with 502, and its body never
// reaches the client.
func TestStandbyBelievesOnlySignedForwardedAnswers(t *testing.T) {
	e := newHAEnv(t)
	a := e.openMember("a")
	waitRole(t, a, "leader")
	b := e.openMember("b")
	waitRole(t, b, "standby")
	orchestrator.StopServingForwarded(t, a)

	body := `[{"id":"forged"}]`
	var sign func(*nats.Msg)
	impostor := testnats.Connect(t, e.srv)
	if _, err := impostor.Subscribe(broker.Subjects{}.OrchAPI(e.cfg.ID), func(m *nats.Msg) {
		out := &nats.Msg{Subject: m.Reply, Data: []byte(body), Header: nats.Header{"Chiffon-Status": {"200"},
			"Content-Type": {"application/json"}}}
		sign(out)
		_ = impostor.PublishMsg(out)
	}); err != nil {
		t.Fatal(err)
	}
	if err := impostor.Flush(); err != nil {
		t.Fatal(err)
	}
	other := newHAEnv(t)
	other.cfg.APIToken = broker.NewToken()
	stranger := other.openMember("stranger") // a group of its own, with another API token
	for name, s := range map[string]func(*nats.Msg){
		"unsigned":                func(*nats.Msg) {},
		"signed with another key": func(m *nats.Msg) { orchestrator.SignForwardedAnswer(stranger, m) },
		"signature of another answer": func(m *nats.Msg) {
			subject := m.Subject
			m.Subject = broker.Subjects{}.ForwardReplies() + ".another"
			orchestrator.SignForwardedAnswer(a, m)
			m.Subject = subject
		},
	} {
		sign = s
		agents, err := e.client(b).Agents(context.Background())
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || len(agents) != 0 {
			t.Errorf("%s: the standby answered %+v, %v, want 502", name, agents, err)
		}
	}
	// The real thing passes: an answer signed by the group (a stopped
	// answering, so the impostor is the only one).
	body = `[]`
	sign = func(m *nats.Msg) { orchestrator.SignForwardedAnswer(a, m) }
	if agents, err := e.client(b).Agents(context.Background()); err != nil || len(agents) != 0 {
		t.Fatalf("a signed answer: %+v, %v", agents, err)
	}
}
