package ui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Two tasks of the same minute, as the API of findServer knows them.
const (
	findA = "01a21b10-c6bc-7000-8000-00000000aaaa"
	findB = "01a21b10-c6bd-7000-8000-11112222bbbb"
)

// findServer serves the dashboard over an API that finds findA and findB by
// their whole ids or short ids, and both by the prefix they share.
func findServer(t *testing.T) *httptest.Server {
	t.Helper()
	tasks := map[string]*task.Task{}
	for _, id := range []string{findA, findB} {
		tk := &task.Task{ID: id, State: task.StateSucceeded, ToAgent: "code", WorkType: "echo", CreatedAt: time.Now()}
		tasks[id], tasks[task.ShortID(id)] = tk, tk
	}
	apiMux := http.NewServeMux()
	apiMux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		ref := r.PathValue("id")
		if tk := tasks[ref]; tk != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(tk)
			return
		}
		if ref == findA[:8] {
			api.WriteErrorDetail(w, http.StatusConflict, api.APIErrorDetail{Code: "ambiguous_id", Field: "id",
				Message: "names more than one task", Candidates: []string{findA, findB}})
			return
		}
		api.WriteError(w, http.StatusNotFound, "not_found", "id", "no task matches "+ref)
	})
	auth := func(tok string) (string, bool) { return "operator", tok == operatorToken }
	u, err := New(Options{API: apiMux, Authenticate: auth, Path: "/", SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return srv
}

// TestFindJumpsToTheTaskOrListsTheCandidates: the search opens the page of the
// task a short id names, by the whole id; a prefix two tasks share lists both;
// an id that names none is a 404 page saying so, the search kept.
func TestFindJumpsToTheTaskOrListsTheCandidates(t *testing.T) {
	srv := findServer(t)
	base := srv.URL + "/"
	c := browserClient(t)
	signIn(t, c, base, operatorToken)
	if _, page := get(t, c, base+"tasks"); !strings.Contains(page, `action="/tasks/find"`) || !strings.Contains(page, `id="find-id"`) {
		t.Fatalf("the task list has no search box:\n%s", page)
	}
	resp, _ := get(t, c, base+"tasks/find?id="+task.ShortID(findB))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+findB {
		t.Fatalf("find %s: %d to %q", task.ShortID(findB), resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := get(t, c, base+"tasks/find?id="+findA[:8])
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, findA[:8]+" names 2 tasks") ||
		!strings.Contains(page, `href="/tasks/`+findA+`"`) || !strings.Contains(page, `href="/tasks/`+findB+`"`) {
		t.Fatalf("find %s: %d\n%s", findA[:8], resp.StatusCode, page)
	}
	resp, page = get(t, c, base+"tasks/find?id=deadbeef")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "No task matches deadbeef.") || !strings.Contains(page, `value="deadbeef"`) {
		t.Fatalf("find deadbeef: %d\n%s", resp.StatusCode, page)
	}
}
