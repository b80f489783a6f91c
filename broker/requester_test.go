package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
)

// TestRequesterTakesAnAnswerOnlyOnItsRequestsSubject: the reply subject is the
// prefix the caller names and a fresh nonce; an answer on any other subject
// under the inbox (another nonce, another agent's prefix) is not taken; "no
// responders" is told apart; after Close nothing is sent.
func TestRequesterTakesAnAnswerOnlyOnItsRequestsSubject(t *testing.T) {
	srv := testnats.Start(t, broker.ServerConfig{})
	nc := testnats.Connect(t, srv)
	peer := testnats.Connect(t, srv)
	s := broker.Subjects{}
	r, err := broker.NewRequester(nc, s.Inbox(broker.RoleOrchestrator, ""))
	if err != nil {
		t.Fatal(err)
	}
	replies := make(chan string, 2)
	if _, err := peer.Subscribe("svc", func(m *nats.Msg) {
		replies <- m.Reply
		// Forgeries first: the same nonce under another agent's prefix, and
		// another nonce under the right one.
		nonce := m.Reply[strings.LastIndexByte(m.Reply, '.')+1:]
		_ = peer.Publish(s.ControlReplies("code-2")+"."+nonce, []byte("forged"))
		_ = peer.Publish(s.ControlReplies("code-1")+"."+broker.NewNonce(), []byte("forged"))
		_ = peer.Publish(m.Reply, []byte("real"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		got, err := r.Request(ctx, &nats.Msg{Subject: "svc"}, s.ControlReplies("code-1"))
		if err != nil || string(got.Data) != "real" {
			t.Fatalf("answer %v, %v; want the real one", got, err)
		}
	}
	first, second := <-replies, <-replies
	prefix := s.ControlReplies("code-1") + "."
	if !strings.HasPrefix(first, prefix) || len(first) != len(prefix)+broker.NonceLen || first == second {
		t.Fatalf("reply subjects %q and %q, want %s<nonce>, new each time", first, second, prefix)
	}
	if _, err := r.Request(ctx, &nats.Msg{Subject: "nobody"}, s.ControlReplies("code-1")); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a request nobody takes: %v, want no responders", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Request(ctx, &nats.Msg{Subject: "svc"}, s.ControlReplies("code-1")); !errors.Is(err, broker.ErrRequesterClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestAgentMayAnswerOnlyItsPeers: an agent answers a task inbox naming it, its
// part of the orchestrator's inbox and a client's inbox; nothing else.
func TestAgentMayAnswerOnlyItsPeers(t *testing.T) {
	s := broker.Subjects{}
	for reply, want := range map[string]bool{
		s.OrchTask("o-1", "code-1", "t-1", "n"): true,
		s.ControlReplies("code-1") + ".n":       true,
		"chiffon.inbox.client.ci.abc.def":       true,
		s.OrchTask("o-1", "code-2", "t-1", "n"): false,
		"lab.orch.o-1.task.code-1.t-1.n":        false,
		s.ControlReplies("code-2") + ".n":       false,
		s.ControlReplies("code-1"):              false,
		s.ForwardReplies() + ".n":               false,
		"chiffon.inbox.orch.x.y":                false,
		"chiffon.inbox.agent.code-1.x":          false,
		"chiffon.agent.code-2.control":          false,
		"chiffon.store.leader":                  false,
		"$JS.API.STREAM.DELETE.CHIFFON_TASKS":   false,
		"chiffon.inbox.client":                  false,
		"chiffon.orch.o-1.task.code-1.t-1.*":    false,
	} {
		if got := s.AgentMayAnswer("code-1", reply); got != want {
			t.Errorf("AgentMayAnswer(code-1, %q) = %v, want %v", reply, got, want)
		}
	}
}
