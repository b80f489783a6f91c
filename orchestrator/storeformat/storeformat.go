// Package storeformat keeps a task store's format: which release's records it
// holds. The leader reads it before its core starts (the store is then its
// alone), brings an older store up to this build's format and records it, and
// refuses a store a newer build has written: it may hold what this build
// would misread, or lose by rewriting.
//
// The formats:
//
//	1  the first release's (no format record): a finished task may leave its
//	   steps "running"; this build ends them as the task ended.
//	2  this build's.
package storeformat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Current is the format this build writes and reads.
const Current = 2

// The record that holds the format: task.Store.Record(recordKind, recordID).
const (
	recordKind = "meta"
	recordID   = "format"
)

// ErrTooNew is Upgrade's refusal of a store written by a newer build.
var ErrTooNew = errors.New("the task store was written by a newer chiffon")

// Upgrade brings st to the Current format and records it, and returns what it
// changed, one line each (none when st was current). A store without the
// record is a new one or one of the first release: its finished tasks whose
// steps were left open have them ended. Only the leader may call it.
func Upgrade(st task.Store) ([]string, error) {
	data, err := st.Record(recordKind, recordID)
	switch {
	case errors.Is(err, task.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("storeformat: read the store's format: %w", err)
	default:
		n, perr := strconv.Atoi(strings.TrimSpace(string(data)))
		if perr != nil {
			return nil, fmt.Errorf("storeformat: the store's format record %q is not a number", data)
		}
		if n > Current {
			return nil, fmt.Errorf("%w (format %d; this build reads up to %d): run that release or a later one, or restore the backup made before the upgrade", ErrTooNew, n, Current)
		}
		if n == Current {
			return nil, nil
		}
	}
	var done []string
	ended, err := endOpenSteps(st)
	if err != nil {
		return nil, err
	}
	if ended > 0 {
		done = append(done, fmt.Sprintf("ended the steps left running of %d finished tasks of the first release", ended))
	}
	if err := st.PutRecord(recordKind, recordID, []byte(strconv.Itoa(Current))); err != nil {
		return nil, fmt.Errorf("storeformat: record the store's format: %w", err)
	}
	return done, nil
}

// endOpenSteps ends the open steps of every finished task, saving each one it
// changes, and returns how many it changed once every save is committed.
func endOpenSteps(st task.Store) (int, error) {
	var changed []*task.Task
	_, err := st.Tasks(func(t *task.Task) bool {
		if t.State.Final() && t.FinishedAt != nil && t.EndSteps(t.State, *t.FinishedAt) {
			changed = append(changed, t)
		}
		return false // keep none: the list is not needed
	}, 0)
	if err != nil {
		return 0, fmt.Errorf("storeformat: read the tasks: %w", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, t := range changed {
		wg.Add(1)
		st.Save(&task.Write{ID: t.ID, Task: t}, func(err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if first == nil && err != nil {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("storeformat: save a task: %w", first)
	}
	return len(changed), nil
}
