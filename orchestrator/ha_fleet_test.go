package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestGroupFleetWritesAndTakeover: a standby forwards what makes a batch and
// changes a schedule to the leader, and serves the reads from the store; when
// the leader leaves, the new one goes on with the running batch (its task
// resumed with the same request_id, the next made once).
func TestGroupFleetWritesAndTakeover(t *testing.T) {
	e := newHAEnv(t, "code-1", "code-2")
	a := e.openMember("a")
	waitRole(t, a, "leader")
	b := e.openMember("b")
	waitRole(t, b, "standby")
	e.o = a
	a1, a2 := e.fakeAgent("code-1"), e.fakeAgent("code-2")
	for _, ag := range []*fakeAgent{a1, a2} {
		ag.listen()
		ag.register(2)
	}
	cb := e.client(b)
	ctx := context.Background()
	s, err := cb.AddSchedule(ctx, api.ScheduleSpec{Name: "nightly", Cron: "0 3 * * *",
		Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"}})
	if err != nil || s.Next == nil {
		t.Fatalf("a schedule through the standby: %+v %v", s, err)
	}
	if s, err = cb.PauseSchedule(ctx, "nightly", true); err != nil || !s.Paused {
		t.Fatalf("pause through the standby: %+v %v", s, err)
	}
	if err := cb.RemoveSchedule(ctx, "nightly"); err != nil {
		t.Fatalf("remove through the standby: %v", err)
	}
	if _, err := cb.Deliveries(ctx); err != nil {
		t.Fatalf("deliveries through the standby: %v", err)
	}
	bt, err := cb.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", MaxParallel: 1})
	if err != nil {
		t.Fatalf("a batch through the standby: %v", err)
	}
	first := a1.next()
	a1.ack(first)
	// The standby reads the tasks from the store, where a task's record may lag
	// its events: dispatched stands for running.
	if got, err := cb.Batch(ctx, bt.ID); err != nil || got.Targets[0].State == api.TargetWaiting ||
		got.Targets[1].State != api.TargetWaiting {
		t.Fatalf("the batch read on the standby: %+v %v", got, err)
	}

	a.Close() // resigns
	waitRole(t, b, "leader")
	e.o = b
	a1.register(2)
	a2.register(2)
	again := a1.next()
	if again.env.RequestID != first.env.RequestID {
		t.Fatalf("resumed with request %s, want %s", again.env.RequestID, first.env.RequestID)
	}
	a1.result(again, envelope.ResultSuccess, 0, "", nil)
	second := a2.next()
	a2.result(second, envelope.ResultSuccess, 0, "", nil)
	if end := waitBatch(t, b, bt.ID); end.State != api.BatchSucceeded {
		t.Fatalf("batch after the takeover: %s %v", end.State, end.Counts)
	}
	noWork(t, a1, 50*time.Millisecond)
	noWork(t, a2, 10*time.Millisecond)
}
