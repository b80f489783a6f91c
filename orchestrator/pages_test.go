package orchestrator_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator"
)

// TestPagesAreMountedAtUIPath: Options.Pages serves ui.path with the prefix
// taken off, beside an API that is unchanged; a ui.path under /api/ or without
// its slashes is refused.
func TestPagesAreMountedAtUIPath(t *testing.T) {
	e := newEnv(t)
	e.cfg.UI.Path = "/ui/"
	var gotPath string
	pages := func(api http.Handler, authenticate func(string) (string, bool), path string) (http.Handler, error) {
		if path != "/ui/" || api == nil || authenticate == nil {
			t.Errorf("pages made for %q", path)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotPath = r.URL.Path
			_, _ = io.WriteString(w, "a page")
		}), nil
	}
	o, err := orchestrator.Open(e.cfg, orchestrator.Options{Pages: pages})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ui/tasks")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "a page" || gotPath != "/tasks" {
		t.Errorf("GET /ui/tasks: %q, the pages saw %q", body, gotPath)
	}
	if status, _ := call(t, e.client(o), "GET", "/api/v1/tasks", e.cfg.APIToken, ""); status != 200 {
		t.Errorf("the API beside the pages: %d", status)
	}
	for _, bad := range []string{"/api/ui/", "ui/", "/ui"} {
		c := e.cfg
		c.UI.Path = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ui.path") {
			t.Errorf("ui.path %q: %v", bad, err)
		}
	}
}
