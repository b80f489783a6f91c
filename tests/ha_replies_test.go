package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestHAReplySubjectsCannotReachTheStore replays, against a group of two
// orchestrator processes on a three-node cluster, the attack that deposed the
// leader: registrations and heartbeats, without a token or with a wrong one,
// whose reply subject is the store's leader key, a schedule's record or a task
// record the API would then show. The cluster is open, so nothing but the
// orchestrator's own rule (answer only into the sender's inbox) stands in the
// way; the broker's permissions, which give the store's subjects to the store
// connection alone, are proved by the init tests. Each round ends with a
// refusal the leader does answer, into code-1's inbox, so the round's attack was
// handled before it. Nothing may reach the store's subjects but the store's own
// writes, the leader keeps leading, the schedule stays and no record appears.
func TestHAReplySubjectsCannotReachTheStore(t *testing.T) {
	s := newHASite(t, 2, 1, haLease)
	lead, _ := s.startGroup()
	leaderName := s.leaderName(lead)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nightly := api.ScheduleSpec{Name: "nightly", Cron: "@daily",
		Task: &api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": 1}}}
	if _, err := s.orchs[lead].client.AddSchedule(ctx, nightly); err != nil {
		t.Fatal(err)
	}

	// Whatever is published on the store's subjects, as the cluster sees it.
	monitor := s.connect()
	stored := make(chan *nats.Msg, 4096)
	if _, err := monitor.ChanSubscribe(subj.Store()+".>", stored); err != nil {
		t.Fatal(err)
	}
	if err := monitor.Flush(); err != nil {
		t.Fatal(err)
	}

	planted := subj.Store() + ".t." + envelope.NewID()
	replies := []string{subj.Store() + ".leader", subj.Store() + ".r.schedule.nightly", planted}
	attacker, err := nats.Connect(strings.Join(s.urls(), ","), nats.CustomInboxPrefix(subj.InboxOf(agentID("code-1"))))
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	register := encode(t, envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: envelope.SupportedVersions, MaxConcurrency: 1, HeartbeatIntervalMS: 500}))
	heartbeat := encode(t, envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Heartbeat{AgentID: "code-1",
		Status: envelope.AgentIdle, MaxConcurrency: 1}))
	for round := range 8 {
		for _, reply := range replies {
			for _, m := range []*nats.Msg{
				{Subject: subj.Register("code-1"), Reply: reply, Data: register},
				{Subject: subj.Heartbeat("code-1"), Reply: reply, Data: heartbeat},
				signed(t, subj.Register("code-1"), envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Ping{}), broker.NewToken(), "code-1"),
			} {
				m.Reply = reply
				if err := attacker.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := attacker.RequestMsg(&nats.Msg{Subject: subj.Register("code-1"), Data: register}, 10*time.Second); err != nil {
			t.Fatalf("round %d: the leader did not answer a refusal into code-1's inbox: %v", round, err)
		}
		if got := s.role(lead); got != "leader" {
			t.Fatalf("round %d: the leader says it is %q", round, got)
		}
	}
	if err := monitor.Flush(); err != nil {
		t.Fatal(err)
	}
	for len(stored) > 0 {
		m := <-stored
		if _, err := envelope.Decode(m.Data); err == nil {
			t.Errorf("an envelope was written to the store's subject %s: %s", m.Subject, m.Data)
		}
		if m.Subject == planted {
			t.Errorf("a record was planted at %s", planted)
		}
	}
	if got := s.leaderName(lead); got != leaderName {
		t.Errorf("leader %q after the attack, %q before", got, leaderName)
	}
	if _, err := s.orchs[lead].client.Schedule(ctx, "nightly"); err != nil {
		t.Errorf("the schedule after the attack: %v", err)
	}
	js, err := jetstream.New(monitor)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, haStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, planted); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("the planted record: %v, want none", err)
	}
}
