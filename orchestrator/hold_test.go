package orchestrator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go"
)

// queueBehind pauses o's task inbox, sends a status of an unknown task (which the
// handler takes, stops on, and then drops without writing anything) and then the
// rest, and waits until the rest are queued behind it. The returned function lets
// the handler go on: it then handles the rest as messages read together, holding
// the writes of all but the last.
func queueBehind(t *testing.T, o *orchestrator.Orchestrator, a *fakeAgent, w *workMsg, rest ...func()) func() {
	t.Helper()
	sub, resume := orchestrator.PauseTaskInbox(o)
	// Failing with the lock held would leave Close waiting for it.
	until := func(what string, cond func() bool) {
		deadline := time.Now().Add(wait)
		for !cond() {
			if time.Now().After(deadline) {
				n, _, _ := sub.Pending()
				d, _ := sub.Delivered()
				resume()
				t.Fatalf("timed out waiting for %s (%d delivered, %d pending)", what, d, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	delivered := func() int64 { n, _ := sub.Delivered(); return n }
	before := delivered()
	unknown := *w
	unknown.req = &envelope.WorkRequest{TaskID: envelope.NewID()}
	unknown.reply = w.reply[:strings.LastIndexByte(w.reply, '.')+1] + unknown.req.TaskID
	a.ack(&unknown)
	until("the first message to reach the handler", func() bool { return delivered() > before })
	for _, send := range rest {
		send()
	}
	until("the next messages to queue up", func() bool { n, _, _ := sub.Pending(); return n == 1+len(rest) }) // nats.go counts the one in the handler
	return resume
}

// waitSucceeded waits for task id with orchestrator.Wait, which learns of the end
// only once its write is committed (unlike Task, which would commit it itself).
func waitSucceeded(t *testing.T, o *orchestrator.Orchestrator, id string, logs fmt.Stringer) *orchestrator.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	task, err := o.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait: %v: a held write was never committed\n%s", err, logs)
	}
	if task.State != orchestrator.StateSucceeded {
		t.Fatalf("task ended %s: %+v", task.State, task.Error)
	}
	return task
}

// A result followed, in the same read, by a message that writes nothing: the
// result's write is held for that message, which must commit it.
func TestHeldWriteCommitsAfterTheLastMessage(t *testing.T) {
	e := newEnv(t, "code-1")
	e.disk = true
	o, a := e.openWithAgent("code-1", 1)
	task := submit(t, o, nil)
	w := a.next()
	garbage := func() {
		m := &nats.Msg{Subject: w.reply, Data: []byte("{not json")}
		m.Header = nats.Header{}
		m.Header.Set("Authorization", "Bearer "+a.token)
		m.Header.Set("Chiffon-Agent-Id", a.id)
		if err := a.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	resume := queueBehind(t, o, a, w, func() { a.result(w, envelope.ResultSuccess, 0, "", nil) }, garbage)
	resume()
	waitSucceeded(t, o, task.ID, e.logs)
}

// A status with output followed by the result with the whole output: the result
// waits for the status's write, which was held for it, before it replaces the
// output pieces.
func TestHeldWriteIsCommittedForAWaiter(t *testing.T) {
	e := newEnv(t, "code-1")
	e.disk = true
	o, a := e.openWithAgent("code-1", 1)
	task := submit(t, o, nil)
	w := a.next()
	resume := queueBehind(t, o, a, w, func() { a.status(w, 50, 1, "hello ", "", 0) },
		func() { a.result(w, envelope.ResultSuccess, 0, "hello world\n", nil) })
	resume()
	done := waitSucceeded(t, o, task.ID, e.logs)
	if done.OutputBytes != int64(len("hello world\n")) || !done.OutputComplete {
		t.Fatalf("output %d bytes, complete %v", done.OutputBytes, done.OutputComplete)
	}
	var out strings.Builder
	if complete, err := e.client(o).Output(context.Background(), task.ID, &out); err != nil || !complete {
		t.Fatalf("output: complete %v, %v", complete, err)
	}
	if out.String() != "hello world\n" {
		t.Fatalf("stored output %q", out.String())
	}
}

// Two statuses and the result read together are written in one transaction: the
// statuses' writes are held and the result's commits them. (A result with output
// would commit them first: it replaces the output pieces they stored.)
func TestMessagesReadTogetherShareACommit(t *testing.T) {
	e := newEnv(t, "code-1")
	e.disk = true
	o, a := e.openWithAgent("code-1", 1)
	task := submit(t, o, nil)
	w := a.next()
	resume := queueBehind(t, o, a, w,
		func() { a.ack(w) },
		func() { a.status(w, 50, 1, "", "", -1) },
		func() { a.result(w, envelope.ResultSuccess, 0, "", nil) })
	resume()
	waitSucceeded(t, o, task.ID, e.logs)
	vs, err := orchestrator.EventVersions(o, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// submitted and dispatched, then ack, status and the end.
	if len(vs) != 5 || vs[0] != vs[1] || vs[2] != vs[3] || vs[3] != vs[4] || vs[1] == vs[2] {
		t.Fatalf("event versions %v: want the last three in one transaction", vs)
	}
}
