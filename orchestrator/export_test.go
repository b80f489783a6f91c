package orchestrator

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/badgerstore"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/httpapi"
	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// BreakStoreWrites makes every later task store write of an open orchestrator fail,
// as a full or broken disk would; reads still work. The orchestrator must run on a
// memstore.
func BreakStoreWrites(o *Orchestrator) {
	o.st.(*memstore.Store).FailWrites(errors.New("task store broken"))
}

// PauseLoop makes the orchestrator's loop wait, so that the jobs posted meanwhile
// (messages handled, timers run out) queue up and then run as one batch. It returns
// the number of jobs waiting and the function that lets the loop go on.
func PauseLoop(o *Orchestrator) (waiting func() int, resume func()) {
	waiting, resume = o.running.Load().Hold()
	if waiting == nil {
		panic("orchestrator closed")
	}
	return waiting, resume
}

// EventVersions returns the Badger version (commit timestamp) of each stored event of
// task id, in order: events written in one transaction share it. The orchestrator
// must run on its default Badger store.
func EventVersions(o *Orchestrator, id string) ([]uint64, error) {
	return o.st.(*badgerstore.Store).EventVersions(id)
}

// StoreType is the type of o's task store, such as "*jsstore.Store".
func StoreType(o *Orchestrator) string { return fmt.Sprintf("%T", o.st) }

// StopServingForwarded ends o's core subscriptions, the forwarded requests'
// among them, as a leader cut off from them would.
func StopServingForwarded(_ testing.TB, o *Orchestrator) { o.running.Load().Unsubscribe() }

// StallStoreWriter blocks the store's writer, as a process stopped or paused
// would be, until release is called: the writes saved meanwhile wait, and so
// does a JetStream store's lease renewal.
func StallStoreWriter(o *Orchestrator) (release func()) {
	stalled, unblock := make(chan struct{}), make(chan struct{})
	o.st.Save(&task.Write{ID: "stall"}, func(error) { close(stalled); <-unblock })
	<-stalled
	return sync.OnceFunc(func() { close(unblock) })
}

// StopFleet stops the batch runners and the schedules' clock, so that a test
// fires schedules itself (FireDue) at the times it chooses.
func StopFleet(o *Orchestrator) { o.fleet.Stop() }

// FireDue fires what is due at now for a clock started at started, and returns
// when the clock would look again.
func FireDue(o *Orchestrator, started, now time.Time) time.Time { return o.fleet.FireDue(started, now) }

// ForgetFiring deletes what schedule name fired last, as if its record had not
// been written.
func ForgetFiring(o *Orchestrator, name string) error {
	return o.st.PutRecord(fleet.FiringRecord, name, nil)
}

// SubmitAs submits req as the task id with request_id requestID, as a batch or a
// schedule does, and reports whether it made the task.
func SubmitAs(o *Orchestrator, req api.SubmitRequest, id, requestID string) (*task.Task, bool, error) {
	return o.running.Load().SubmitAs(req, task.Origin{ID: id, RequestID: requestID})
}

// SignForwardedAnswer signs msg as o signs its answers to forwarded requests.
func SignForwardedAnswer(o *Orchestrator, msg *nats.Msg) {
	httpapi.NewSigner(o.sec.apiTokens[0].Secret).Sign(msg)
}

// StoredOutputBytes is the sum of the lengths of task id's output pieces as its
// store holds them (overlapping pieces count twice), once its writes so far are
// committed.
func StoredOutputBytes(o *Orchestrator, id string) (int64, error) {
	o.running.Load().WaitWritten(id)
	spans, err := o.st.OutputSpans(id)
	var n int64
	for _, s := range spans {
		n += s.End - s.Start
	}
	return n, err
}

// Admit and Forget are the running core's, as package enroll calls them.
func Admit(o *Orchestrator, a policy.AgentConfig) { o.running.Load().Admit(a) }

// Forget drops agent id from the running core.
func Forget(o *Orchestrator, id, why string) { o.running.Load().Forget(id, why) }
