package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chromedp/chromedp"
)

// rowOf is JavaScript for the text of the task list's row that links to task id.
func rowOf(id string) string {
	return fmt.Sprintf(`document.querySelector('a[href$="/tasks/%s"]').closest("tr").innerText`, id)
}

// TestDashboardShortIDsAndSearch: the task list shows two tasks of the same
// minute by short ids that differ (not by the beginning their ids share); its
// search box jumps to the task a short id names, whose page shows the short id
// and the whole id; a prefix both share lists both.
func TestDashboardShortIDsAndSearch(t *testing.T) {
	d := newDash(t)
	first, second := submitSameMinute(t, func() *task.Task {
		tk, err := d.client.Submit(context.Background(), api.SubmitRequest{ToAgent: "infra", WorkType: "echo",
			Parameters: map[string]any{"message": "short ids"}})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	})
	short1, short2, shared := task.ShortID(first.ID), task.ShortID(second.ID), first.ID[:task.MinPrefixLen]
	d.login(d.token("api.token"))
	d.do("the task list", chromedp.Navigate(d.base+"tasks"), chromedp.WaitVisible(chromedp.CSS("#find-id")))
	d.shot("tasks-short-ids")
	row1, row2 := eval[string](d, rowOf(first.ID)), eval[string](d, rowOf(second.ID))
	if short1 == short2 || !strings.Contains(row1, short1) || !strings.Contains(row2, short2) ||
		strings.Contains(row1, shared) || strings.Contains(row2, shared) {
		t.Fatalf("the task list's rows %q and %q, want short ids %s and %s (not %s)", row1, row2, short1, short2, shared)
	}

	d.do("search a short id", chromedp.SendKeys(chromedp.CSS("#find-id"), short2),
		chromedp.Click(chromedp.CSS(`form[role="search"] button`)))
	d.waitJS("the task's page", `location.pathname === "/tasks/`+second.ID+`" && document.getElementById("task-id") !== null`, 20*time.Second)
	d.shot("task-found")
	if got := eval[string](d, `document.getElementById("short-id").textContent`); got != short2 {
		t.Errorf("the task page's title shows %q, want %s", got, short2)
	}
	if got := eval[string](d, `document.getElementById("task-id").textContent`); got != second.ID {
		t.Errorf("the task page shows id %q, want %s", got, second.ID)
	}

	d.do("search a shared prefix", chromedp.Navigate(d.base+"tasks"), chromedp.WaitVisible(chromedp.CSS("#find-id")),
		chromedp.SendKeys(chromedp.CSS("#find-id"), shared), chromedp.Click(chromedp.CSS(`form[role="search"] button`)))
	d.waitJS("the tasks it names", `location.pathname === "/tasks/find" && document.querySelector('a[href$="/tasks/`+first.ID+
		`"]') !== null && document.querySelector('a[href$="/tasks/`+second.ID+`"]') !== null`, 20*time.Second)
	d.shot("tasks-ambiguous")
	if text := d.pageText(); !strings.Contains(text, shared+" names "+strconv.Itoa(2)+" tasks") {
		t.Errorf("the search of %s says:\n%s", shared, text)
	}
}
