package ui

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// batchListSize is how many batches the Batches page shows: the newest.
const batchListSize = 100

// targetNotes say why a batch's agent has no task, by the target's state.
var targetNotes = map[string]string{
	api.TargetOffline:     "no task: the agent was offline when the batch was made",
	api.TargetUnknown:     "no task: the agent was never heard from",
	api.TargetUnsupported: "no task: the agent does not offer this work type",
	api.TargetWaiting:     "waits for room under max parallel",
	api.TargetRegistering: "waits for the agent to register: it is in the orchestrator's config and not online yet (unknown if it does not come in time)",
	api.TargetSkipped:     "not started: a task of the batch failed (stop on failure)",
}

// targetOrder is the order a batch's targets are counted in: what goes on,
// what went well, what did not, what got no task.
var targetOrder = []string{
	string(task.StateRunning), string(task.StateDispatched), string(task.StatePending),
	api.TargetRegistering, api.TargetWaiting, string(task.StateSucceeded), string(task.StateFailed),
	string(task.StateError), string(task.StateCancelled), api.TargetSkipped,
	api.TargetOffline, api.TargetUnknown, api.TargetUnsupported,
}

// scriptData is what the batch page's script needs to show a target as the
// server does: the notes and the order of the counts, as JSON.
func scriptData(notes map[string]string) string {
	b, _ := json.Marshal(map[string]any{"notes": notes, "order": targetOrder}) // strings: it encodes
	return string(b)
}

// stateCount is how many targets of a batch are in a state.
type stateCount struct {
	State string
	N     int
}

// countList is a batch's counts in targetOrder, then any other state by name.
func countList(counts map[string]int) []stateCount {
	var out []stateCount
	for _, s := range targetOrder {
		if n := counts[s]; n > 0 {
			out = append(out, stateCount{s, n})
		}
	}
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		if n := counts[s]; n > 0 && !slices.Contains(targetOrder, s) {
			out = append(out, stateCount{s, n})
		}
	}
	return out
}

// targetStarted reports whether a batch's target has its task: a link to it
// leads somewhere.
func targetStarted(t api.BatchTarget) bool {
	return t.TaskID != "" && t.State != api.TargetWaiting && t.State != api.TargetSkipped
}

func (u *UI) batches(w http.ResponseWriter, r *http.Request, sess *session) {
	var list []*api.Batch
	data := map[string]any{"Limit": batchListSize}
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/batches?limit="+strconv.Itoa(batchListSize), nil, &list); err != nil {
		data["Problem"] = err.Error()
	}
	data["Batches"] = list
	u.render(w, http.StatusOK, "batches", sess, data)
}

func (u *UI) batch(w http.ResponseWriter, r *http.Request, sess *session) {
	var b api.Batch
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/batches/"+url.PathEscape(r.PathValue("id")), nil, &b); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	notes := batchNotes(&b)
	u.render(w, http.StatusOK, "batch", sess, map[string]any{"Batch": &b, "Notes": notes, "Script": scriptData(notes),
		"Waiting": batchWaits(&b)})
}

// batchEvents relays a batch's event stream (a "batch" event with the whole
// batch at each change, the last once its end is stored) under the session's
// cookie, for the batch page's script. Each event goes as the API sent it.
func (u *UI) batchEvents(w http.ResponseWriter, r *http.Request, sess *session) {
	req := apiRequest(r.Context(), sess, http.MethodGet, "/api/v1/batches/"+url.PathEscape(r.PathValue("id"))+"/events", nil)
	u.relay(w, req, plainBlock)
}

// plainBlock is one event of the API's stream, unchanged.
func plainBlock(block []string) string {
	return strings.Join(block, "\n") + "\n"
}
