package ui

import (
	"strings"
	"testing"
)

// TestTaskPageCarriesWhatItsScriptUpdates: a task's page has what its script
// changes as the task runs: the steps list, there but hidden while the task
// has no step, and the time so far with its start and the server's clock; a
// finished task's time has its end, so that it does not tick.
func TestTaskPageCarriesWhatItsScriptUpdates(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	tasks := fakeApprovalTasks()
	_, waiting := get(t, c, srv.URL+"/tasks/"+fakeWaitingTaskID)
	start := tasks[fakeWaitingTaskID].CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	for _, want := range []string{`<section id="steps-section" aria-labelledby="steps-title" hidden>`, `<ol class="steps" id="steps"></ol>`,
		`<time id="elapsed" data-start="` + start + `" data-now="`} {
		if !strings.Contains(waiting, want) {
			t.Errorf("the waiting task's page lacks %s", want)
		}
	}
	_, rejected := get(t, c, srv.URL+"/tasks/"+fakeRejectedTaskID)
	end := tasks[fakeRejectedTaskID].FinishedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if !strings.Contains(rejected, ` data-end="`+end+`"`) {
		t.Errorf("the finished task's time has no end:\n%s", rejected)
	}
	if strings.Contains(waiting, "data-end=") {
		t.Errorf("the waiting task's time has an end: it would not tick")
	}
}
