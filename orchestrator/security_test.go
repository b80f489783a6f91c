package orchestrator_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// refusal returns the token_status of a 5004 answer, failing on anything else.
func refusal(t *testing.T, env *envelope.Envelope) string {
	t.Helper()
	p, ok := env.Payload.(*envelope.ErrorPayload)
	if !ok || p.ErrorCode != int(errcodes.AuthenticationFailed) {
		t.Fatalf("want a 5004, got %s %+v", env.Type, env.Payload)
	}
	s, _ := p.ErrorContext[errcodes.KeyTokenStatus].(string)
	return s
}

func TestRegistrationAsAnotherTypeIsRefused(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	reg := envelope.New(envelope.Infra, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: []string{"1.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 60000})
	data, _ := envelope.Encode(reg)
	rep, err := a.nc.RequestMsg(natsMsg(a, data), wait)
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Decode(rep.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got := refusal(t, env); got != errcodes.TokenWrongType {
		t.Fatalf("token_status %q, want %q", got, errcodes.TokenWrongType)
	}
	if got := o.Agents()[0]; got.State != "unknown" {
		t.Fatalf("agent %+v known after registering as another type", got)
	}
}

// TestSecondProcessWithALiveAgentIDIsRefused runs two agent processes with one id:
// the second is refused before it takes any work, its Run ends with the refusal,
// and every task runs once, on the first.
func TestSecondProcessWithALiveAgentIDIsRefused(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	var first, second atomic.Int32
	e.realAgent("code-1", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		first.Add(1)
		return agent.Result{Output: "first"}, nil
	})
	dup, err := agent.New(agent.Config{ID: "code-1", Type: "code", NATS: e.cfg.NATS, DataDir: t.TempDir(),
		Token: e.tokens["code-1"], OrchestratorToken: e.orchTokens["code-1"], Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	dup.Handle("echo", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		second.Add(1)
		return agent.Result{Output: "second"}, nil
	})
	done := make(chan error, 1)
	go func() { done <- dup.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "registration refused") || !strings.Contains(err.Error(), errcodes.TokenInstanceLive) {
			t.Fatalf("second process: Run = %v, want a refusal naming %s", err, errcodes.TokenInstanceLive)
		}
	case <-time.After(wait):
		t.Fatal("the second process with a live id was not refused")
	}
	select {
	case <-dup.Ready():
		t.Fatal("the refused process became ready for work")
	default:
	}
	for range 10 {
		if final := waitFinal(t, o, submit(t, o, nil).ID); final.State != task.StateSucceeded {
			t.Fatalf("task %s: %+v", final.State, final.Error)
		}
	}
	if first.Load() != 10 || second.Load() != 0 {
		t.Fatalf("runs: first process %d, second %d; want 10 and 0", first.Load(), second.Load())
	}
}

// TestAgentRestartedAfterACrashIsAccepted: a process whose connection is gone
// answers no probe, so a new process with the same id is accepted; while the old
// one is connected and answering, it is not.
func TestAgentRestartedAfterACrashIsAccepted(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	old := e.fakeAgent("code-1")
	old.instance = "old"
	old.listen()
	old.register(4)

	intruder := e.fakeAgent("code-1")
	intruder.instance = "intruder"
	if got := refusal(t, intruder.registerAs(intruder.token, 4)); got != errcodes.TokenInstanceLive {
		t.Fatalf("second live process: token_status %q", got)
	}
	old.nc.Close() // the crash: its subscriptions go with the connection
	restarted := e.fakeAgent("code-1")
	restarted.instance = "restarted"
	restarted.listen()
	restarted.register(4)
	tsk := submit(t, o, nil)
	w := restarted.next()
	restarted.result(w, envelope.ResultSuccess, 0, "ok", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("task on the restarted agent: %s", final.State)
	}
}

// TestForgedNoRespondersChangesNothing publishes the server's "no responders" form
// on a task's inbox with a wrong nonce: the attempt goes on and no breaker opens.
func TestForgedNoRespondersChangesNothing(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Breaker.Failures = 1
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	in, ok := broker.ParseTaskInbox(w.reply)
	if !ok || in.AgentID != "code-1" || in.TaskID != tsk.ID || len(in.Nonce) < 16 {
		t.Fatalf("reply subject %q is not a per-attempt task inbox", w.reply)
	}
	forged := strings.TrimSuffix(w.reply, in.Nonce) + "guessed"
	for range 3 {
		m := &nats.Msg{Subject: forged, Header: nats.Header{"Status": []string{"503"}}}
		if err := a.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	a.ack(w) // a message after the forgeries: once it is handled, they were too
	waitFor(t, "task running", func() bool { tk, _ := o.Task(tsk.ID); return tk.State == task.StateRunning })
	if tk, _ := o.Task(tsk.ID); tk.Attempts != 1 || len(tk.Retries) != 0 {
		t.Fatalf("a forged no-responders failed the attempt: %+v", tk)
	}
	if b := breakerOf(o, "code-1"); b != "closed" {
		t.Fatalf("breaker %s after forged no-responders", b)
	}
	a.result(w, envelope.ResultSuccess, 0, "real", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("task %s", final.State)
	}
}

// TestTaskMessageCountsOnlyFromTheAgentOfTheAttempt: another configured agent, with
// its own valid token, cannot answer a task that went to code-1.
func TestTaskMessageCountsOnlyFromTheAgentOfTheAttempt(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Breaker.Failures = 1
	o, a := e.openWithAgent("code-1", 4)
	other := e.fakeAgent("code-2")
	tsk := submit(t, o, nil)
	w := a.next()
	forged := w.env.Reply(&envelope.WorkResult{TaskID: tsk.ID, Status: envelope.ResultFailed, ExitCode: 1, Output: "forged"})
	other.respond(w.reply, forged) // on code-1's inbox, as code-2
	in, _ := broker.ParseTaskInbox(w.reply)
	ownInbox := broker.Subjects{}.OrchTask(o.ID(), "code-2", tsk.ID, in.Nonce)
	other.respond(ownInbox, forged) // on an inbox naming code-2, for code-1's task
	other.respond(ownInbox, w.env.Reply(envelope.NewErrorPayload(errcodes.NewAgentUnavailable("forged", "code-1", nil))))
	a.ack(w)
	waitFor(t, "task running", func() bool { tk, _ := o.Task(tsk.ID); return tk.State == task.StateRunning })
	a.result(w, envelope.ResultSuccess, 0, "real", nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.Attempts != 1 || breakerOf(o, "code-1") != "closed" {
		t.Fatalf("forged messages counted: %s, %d attempts, breaker %s", final.State, final.Attempts, breakerOf(o, "code-1"))
	}
}

// TestAnswerToAnUnauthenticatedSenderCarriesNoCredential: the orchestrator's 5004
// has no token header and no token in its body.
func TestAnswerToAnUnauthenticatedSenderCarriesNoCredential(t *testing.T) {
	e := newEnv(t, "code-1")
	e.open()
	a := e.fakeAgent("code-1")
	reg := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: []string{"1.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 60000})
	data, _ := envelope.Encode(reg)
	for _, tok := range []string{"", broker.NewToken(), e.orchTokens["code-1"]} {
		m := &nats.Msg{Subject: broker.Subjects{}.Register("code-1"), Data: data}
		if tok != "" {
			broker.SetAuth(m, tok, "code-1")
		}
		rep, err := a.nc.RequestMsg(m, wait)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Header) != 0 {
			t.Errorf("5004 answer has headers %v", rep.Header)
		}
		for _, secret := range []string{e.tokens["code-1"], e.orchTokens["code-1"]} {
			if strings.Contains(string(rep.Data), secret) {
				t.Errorf("5004 answer holds a token")
			}
		}
		env, err := envelope.Decode(rep.Data)
		if err != nil {
			t.Fatal(err)
		}
		if env.RequestID == reg.RequestID {
			t.Error("5004 answer reuses the sender's request_id")
		}
		refusal(t, env)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestAuthFailureFloodIsCountedAndLoggedAtABoundedRate: 500 unauthenticated
// messages are all counted, and logged in a handful of lines.
func TestAuthFailureFloodIsCountedAndLoggedAtABoundedRate(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	const n = 500
	for range n {
		m := &nats.Msg{Subject: broker.Subjects{}.Heartbeat("code-1"), Data: []byte(`{}`)}
		broker.SetAuth(m, broker.NewToken(), "code-1")
		if err := a.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client(o)
	waitFor(t, "every refusal counted", func() bool {
		_, metrics := call(t, c, "GET", "/metrics", "", "")
		return strings.Contains(metrics, fmt.Sprintf("chiffon_orchestrator_auth_failures_total %d", n))
	})
	if lines := strings.Count(e.logs.String(), "authentication failed"); lines < 1 || lines > 10 {
		t.Fatalf("%d log lines for %d refused messages, want a few", lines, n)
	}
}

// TestUnansweredProbePutsTheRegistrationOff: a process subscribed to the control
// subject that answers nothing (hung, or the registering one too slow) gets a
// retryable refusal, not the final one: the agent registers again.
func TestUnansweredProbePutsTheRegistrationOff(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Control = 200 * time.Millisecond
	e.open()
	a := e.fakeAgent("code-1")
	a.instance, a.silent = "slow", true
	a.listen()
	rep := a.registerAs(a.token, 4)
	p, ok := rep.Payload.(*envelope.ErrorPayload)
	if !ok || p.ErrorCode != int(errcodes.Timeout) {
		t.Fatalf("unanswered probe: got %s %+v, want a retryable 5001", rep.Type, rep.Payload)
	}
}
