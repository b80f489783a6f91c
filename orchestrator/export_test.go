package orchestrator

import (
	"errors"

	"github.com/chiffon-dev/chiffon/orchestrator/badgerstore"
	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/nats-io/nats.go"
)

// BreakStoreWrites makes every later task store write of an open orchestrator fail,
// as a full or broken disk would; reads still work. The orchestrator must run on a
// memstore.
func BreakStoreWrites(o *Orchestrator) {
	o.st.(*memstore.Store).FailWrites(errors.New("task store broken"))
}

// PauseTaskInbox takes the orchestrator's lock, so that its task inbox handler
// stops at the first message that needs it and the next ones queue up behind.
// It returns the inbox subscription and the function that lets the handler go on.
func PauseTaskInbox(o *Orchestrator) (*nats.Subscription, func()) {
	o.mu.Lock()
	for _, s := range o.subs {
		if s.Subject == o.subj.OrchTasks(o.id) {
			return s, o.mu.Unlock
		}
	}
	o.mu.Unlock()
	panic("no task inbox subscription")
}

// EventVersions returns the Badger version (commit timestamp) of each stored event of
// task id, in order: events written in one transaction share it. The orchestrator
// must run on its default Badger store.
func EventVersions(o *Orchestrator, id string) ([]uint64, error) {
	return o.st.(*badgerstore.Store).EventVersions(id)
}
