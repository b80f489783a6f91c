package orchestrator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// queueBehind pauses o's loop, sends the messages of rest and waits until each has
// been posted to the loop as a job. The returned function lets the loop go on: it
// then runs them as one batch, holding the writes of all but the last.
func queueBehind(t *testing.T, o *orchestrator.Orchestrator, rest ...func()) func() {
	t.Helper()
	waiting, resume := orchestrator.PauseLoop(o)
	t.Cleanup(resume) // failing with the loop paused would leave Close waiting for it
	for _, send := range rest {
		send()
	}
	deadline := time.Now().Add(wait)
	for waiting() < len(rest) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d messages to queue up (%d did)", len(rest), waiting())
		}
		time.Sleep(time.Millisecond)
	}
	return resume
}

// waitSucceeded waits for task id with orchestrator.Wait, which learns of the end
// only once its write is committed (unlike Task, which would commit it itself).
func waitSucceeded(t *testing.T, o *orchestrator.Orchestrator, id string, logs fmt.Stringer) *task.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tsk, err := o.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait: %v: a held write was never committed\n%s", err, logs)
	}
	if tsk.State != task.StateSucceeded {
		t.Fatalf("task ended %s: %+v", tsk.State, tsk.Error)
	}
	return tsk
}

// A result followed, in the same batch, by a message that writes nothing: the
// result's write is held for that message, and the end of the batch must commit it.
func TestHeldWriteCommitsAfterTheLastMessage(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 1)
	tsk := submit(t, o, nil)
	w := a.next()
	// A status of a task the orchestrator does not know: the loop drops it.
	unknown := *w
	unknown.req = &envelope.WorkRequest{TaskID: envelope.NewID()}
	unknown.reply = w.reply[:strings.LastIndexByte(w.reply, '.')+1] + unknown.req.TaskID
	resume := queueBehind(t, o, func() { a.result(w, envelope.ResultSuccess, 0, "", nil) }, func() { a.ack(&unknown) })
	resume()
	waitSucceeded(t, o, tsk.ID, e.logs)
}

// A status with output followed by the result with the whole output: the result
// waits for the status's write, which was held for it, before it replaces the
// output pieces.
func TestHeldWriteIsCommittedForAWaiter(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 1)
	tsk := submit(t, o, nil)
	w := a.next()
	resume := queueBehind(t, o, func() { a.status(w, 50, 1, "hello ", "", 0) },
		func() { a.result(w, envelope.ResultSuccess, 0, "hello world\n", nil) })
	resume()
	done := waitSucceeded(t, o, tsk.ID, e.logs)
	if done.OutputBytes != int64(len("hello world\n")) || !done.OutputComplete {
		t.Fatalf("output %d bytes, complete %v", done.OutputBytes, done.OutputComplete)
	}
	var out strings.Builder
	if complete, err := e.client(o).Output(context.Background(), tsk.ID, &out); err != nil || !complete {
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
	o, a := e.openWithAgent("code-1", 1)
	tsk := submit(t, o, nil)
	w := a.next()
	resume := queueBehind(t, o,
		func() { a.ack(w) },
		func() { a.status(w, 50, 1, "", "", -1) },
		func() { a.result(w, envelope.ResultSuccess, 0, "", nil) })
	resume()
	waitSucceeded(t, o, tsk.ID, e.logs)
	vs, err := orchestrator.EventVersions(o, tsk.ID)
	if err != nil {
		t.Fatal(err)
	}
	// submitted and dispatched, then ack, status and the end.
	if len(vs) != 5 || vs[0] != vs[1] || vs[2] != vs[3] || vs[3] != vs[4] || vs[1] == vs[2] {
		t.Fatalf("event versions %v: want the last three in one transaction", vs)
	}
}
