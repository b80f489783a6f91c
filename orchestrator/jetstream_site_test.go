package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamStoreOnASecureSite: on a broker set up as chiffon init sets one up
// (TLS, an NKey per daemon, each one's allow lists), with JetStream on, the
// orchestrator keeps its tasks in JetStream, and an agent can neither use the
// JetStream API nor write the store's subjects: it cannot plant or rewrite a task.
func TestJetStreamStoreOnASecureSite(t *testing.T) {
	subj := broker.Subjects{}
	ids := []broker.Identity{{Role: broker.RoleOrchestrator}, {Role: broker.RoleAgent, Name: "code-1"}}
	seeds, users := siteUsers(t, ids)
	srv := testnats.StartSecureJetStream(t, users)
	cfg := orchestrator.Config{
		NATS:    broker.NATSConfig{URLs: []string{srv.ClientURL()}, NKeyFile: seeds[0], TLS: srv.TLS},
		DataDir: t.TempDir(), APIToken: broker.NewToken(),
		Agents: []orchestrator.AgentConfig{{ID: "code-1", Type: envelope.Code, Token: broker.NewToken(),
			OrchestratorToken: broker.NewToken()}},
		Store: orchestrator.StoreConfig{Kind: orchestrator.StoreJetStream},
	}
	o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("Open with the JetStream store on a secure broker: %v", err)
	}
	defer o.Close()
	if got := orchestrator.StoreType(o); got != "*jsstore.Store" {
		t.Fatalf("store %s, want *jsstore.Store", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	task, err := o.Submit(ctx, orchestrator.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	record := subj.Store() + ".t." + task.ID

	// What the store holds, read as the orchestrator.
	orchNC := testnats.ConnectAs(t, srv.Server, seeds[0], srv.TLS, subj.Inbox(broker.RoleOrchestrator, ""))
	stored := func() []byte {
		t.Helper()
		js, err := jetstream.New(orchNC)
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, "CHIFFON_TASKS")
		if err != nil {
			t.Fatalf("the task stream: %v", err)
		}
		m, err := st.GetLastMsgForSubject(ctx, record)
		if err != nil {
			t.Fatalf("the task's record in JetStream: %v", err)
		}
		return m.Data
	}
	stored() // the orchestrator wrote it there

	// The agent: the JetStream API and the store's subjects are not its own.
	agentNC := testnats.ConnectAs(t, srv.Server, seeds[1], srv.TLS, subj.InboxOf(ids[1]))
	violations := make(chan error, 8)
	agentNC.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	})
	if err := agentNC.Publish(record, []byte(`{"id":"`+task.ID+`","state":"succeeded"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("agent's write to the store: %v, want a permissions violation", err)
		}
	case <-time.After(wait):
		t.Fatal("the agent's write to the store was not refused")
	}
	ajs, err := jetstream.New(agentNC)
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := ajs.AccountInfo(short); err == nil {
		t.Fatal("the agent used the JetStream API")
	}
	// The orchestrator rewrites the record as it retries (no agent is online); the
	// agent's forgery must not be what is stored.
	var after orchestrator.Task
	if err := json.Unmarshal(stored(), &after); err != nil {
		t.Fatal(err)
	}
	if after.State != orchestrator.StatePending || after.RequestID != task.RequestID {
		t.Fatalf("the task's record after the agent's write: %+v", after)
	}
}
