package orchestrator

import (
	"github.com/dgraph-io/badger/v4"
	"github.com/nats-io/nats.go"
)

// BreakStoreWrites makes every later task store write of an open orchestrator fail,
// as a full or broken disk would; reads still work.
func BreakStoreWrites(o *Orchestrator) { o.st.w.Close() }

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
// task id, in order: events written in one transaction share it.
func EventVersions(o *Orchestrator, id string) ([]uint64, error) {
	var vs []uint64
	err := o.st.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: eventPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			vs = append(vs, it.Item().Version())
		}
		return nil
	})
	return vs, err
}
