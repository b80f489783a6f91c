package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// maxCandidates bounds the ids an ambiguous_id answer lists.
const maxCandidates = 10

// withTask reads the task the {id} path value names: its id, its short id or a
// prefix of it (task.ParseIDRef), found in the store, so on a standby too.
func (a *API) withTask(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, ok := resolveID(w, r.PathValue("id"), "task", a.st.TaskIDs); ok {
			h(w, r, id)
		}
	}
}

// resolveID returns the whole id that typed names, what being "task" or "batch"
// and find the ids a short id or a prefix names (task.Store.TaskIDs). A whole
// id comes back as it is, found or not, for the handler to read. Otherwise it
// answers 400 for what is no id, 404 when nothing matches and 409
// ambiguous_id, with the candidates, when several do, and reports false.
func resolveID(w http.ResponseWriter, typed, what string, find func(part string, limit int) ([]string, error)) (string, bool) {
	full, part, ok := task.ParseIDRef(typed)
	switch {
	case !ok:
		writeError(w, http.StatusBadRequest, "invalid_field", "id", fmt.Sprintf(
			"must be a %s id (a UUID), its short id (its last %d hex digits) or its first %d or more characters",
			what, task.ShortIDLen, task.MinPrefixLen))
		return "", false
	case full != "":
		return full, true
	}
	ids, err := find(part, maxCandidates+1)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return "", false
	case len(ids) == 0:
		writeError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("no %s matches %s", what, part))
		return "", false
	case len(ids) > 1:
		writeAmbiguous(w, what, part, ids)
		return "", false
	}
	return ids[0], true
}

// writeAmbiguous answers 409 ambiguous_id: part names each of ids (one more
// than maxCandidates says there are more).
func writeAmbiguous(w http.ResponseWriter, what, part string, ids []string) {
	more := ""
	if len(ids) > maxCandidates {
		ids, more = ids[:maxCandidates], " and more"
	}
	api.WriteErrorDetail(w, http.StatusConflict, api.APIErrorDetail{Code: "ambiguous_id", Field: "id",
		Message: fmt.Sprintf("%s names more than one %s: %s%s; give more of the id",
			part, what, strings.Join(ids, ", "), more),
		Candidates: ids})
}
