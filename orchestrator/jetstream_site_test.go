package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamStoreOnASecureSite: on a broker set up as chiffon init sets one up
// (TLS, an NKey per daemon, each one's allow lists), with JetStream on, the
// orchestrator keeps its tasks in JetStream over its store connection, and
// neither an agent nor the orchestrator's own connection, the one that answers
// agents, can use the JetStream API or write the store's subjects: no sender can
// plant or rewrite a task, or make the orchestrator do it.
func TestJetStreamStoreOnASecureSite(t *testing.T) {
	subj := broker.Subjects{}
	ids := []broker.Identity{{Role: broker.RoleOrchestrator}, {Role: broker.RoleStore}, {Role: broker.RoleAgent, Name: "code-1"}}
	seeds, users := siteUsers(t, ids)
	srv := testnats.StartSecureJetStream(t, users)
	cfg := orchestrator.Config{
		NATS:    broker.NATSConfig{URLs: []string{srv.ClientURL()}, NKeyFile: seeds[0], TLS: srv.TLS},
		DataDir: t.TempDir(), APIToken: broker.NewToken(),
		Agents: []policy.AgentConfig{{ID: "code-1", Type: envelope.Code, Token: broker.NewToken(),
			OrchestratorToken: broker.NewToken()}},
		Store: orchestrator.StoreConfig{Kind: orchestrator.StoreJetStream,
			JetStream: orchestrator.JetStreamStoreConfig{NATS: broker.NATSConfig{NKeyFile: seeds[1]}}},
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
	tsk, err := o.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	record := subj.Store() + ".t." + tsk.ID

	// What the store holds, read as the store.
	storeNC := testnats.ConnectAs(t, srv.Server, seeds[1], srv.TLS, subj.StoreInbox())
	stored := func() []byte {
		t.Helper()
		js, err := jetstream.New(storeNC)
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

	// The agent and the orchestrator's own identity: the JetStream API and the
	// store's subjects are not theirs.
	for _, i := range []int{2, 0} {
		nc := testnats.ConnectAs(t, srv.Server, seeds[i], srv.TLS, subj.InboxOf(ids[i]))
		violations := make(chan error, 8)
		nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case violations <- err:
			default:
			}
		})
		if err := nc.Publish(record, []byte(`{"id":"`+tsk.ID+`","state":"succeeded"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("%s's write to the store: %v, want a permissions violation", ids[i].Role, err)
			}
		case <-time.After(wait):
			t.Fatalf("%s's write to the store was not refused", ids[i].Role)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.AccountInfo(short)
		cancelShort()
		if err == nil {
			t.Fatalf("%s used the JetStream API", ids[i].Role)
		}
	}
	// The orchestrator rewrites the record as it retries (no agent is online); the
	// agent's forgery must not be what is stored.
	var after task.Task
	if err := json.Unmarshal(stored(), &after); err != nil {
		t.Fatal(err)
	}
	if after.State != task.StatePending || after.RequestID != tsk.RequestID {
		t.Fatalf("the task's record after the agent's write: %+v", after)
	}
}
