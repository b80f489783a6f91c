package fleet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Core is what the fleet needs of the orchestrator's core: its Go API, no more.
type Core interface {
	// SubmitAs stores and routes a task for req, validated, made as org says.
	// With org.ID set it is idempotent: a task of that id that exists (live or
	// stored) is returned as it is, with made false.
	SubmitAs(req api.SubmitRequest, org task.Origin) (t *task.Task, made bool, err error)
	// TasksByID returns the tasks ids name, by id, each as it is now (an ended
	// one once its end is stored); a task the core does not hold is left out.
	TasksByID(ids []string) (map[string]*task.Task, error)
	// CheckSize refuses a valid request whose work_request is too large for the
	// broker or for an agent it may go to; such a refusal is Params.TooLarge
	// (errors.Is).
	CheckSize(req *api.SubmitRequest) error
	// CheckWorkType refuses a valid request whose work type or parameters the
	// catalogue of the target's agents refuses, with an *api.WorkTypeError.
	CheckWorkType(req *api.SubmitRequest) error
	// BatchTargets lists the agents req matches now, by id: the online ones
	// offering its work type with no state yet (they get a task), the others
	// with theirs (offline, unsupported, unknown).
	BatchTargets(req *api.BatchRequest) ([]api.BatchTarget, error)
	// Approval is the waiting approval req needs, asked at now, or nil when its
	// work type and its pinned agent need none.
	Approval(req *api.SubmitRequest, now time.Time) *task.Approval
	// Cancel cancels task id, saying why; a task that ended is refused with
	// api.ErrFinished.
	Cancel(id, reason string) (*task.Task, error)
}

// Records is the part of the task store (task.Store) that keeps the fleet's
// records: batches, schedules and their last firings.
type Records interface {
	// Record returns the record id of kind, or task.ErrNotFound.
	Record(kind, id string) ([]byte, error)
	// Records returns every record of kind by id.
	Records(kind string) (map[string][]byte, error)
	// PutRecord stores data as the record id of kind; nil data deletes it.
	PutRecord(kind, id string, data []byte) error
}

// Record kinds of the fleet in the task store. A schedule's definition and what
// it last fired are two records, so that the clock (schedrun.go) and the calls
// that change a schedule never overwrite each other.
const (
	BatchRecord    = "batch"
	ScheduleRecord = "schedule"
	FiringRecord   = "firing"
	// WorkflowRecord holds a workflow made through the API; RunRecord a
	// workflow run.
	WorkflowRecord = "workflow"
	RunRecord      = "workflow-run"
)

// putRecord stores v, as JSON, as the record id of kind; what names it in an
// error.
func putRecord(st Records, kind, id, what string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	return st.PutRecord(kind, id, data)
}

// getRecord reads the record id of kind, as JSON, into a new T: task.ErrNotFound
// when there is none; what names it in an error.
func getRecord[T any](st Records, kind, id, what string) (*T, error) {
	data, err := st.Record(kind, id)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return v, nil
}
