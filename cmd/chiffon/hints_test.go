package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestErrorsOfReachingTheAPISayWhatToDo: a certificate of an unknown CA names
// --api-ca-file, plain HTTP to the HTTPS API names https://, for a request and
// for an event stream alike.
func TestErrorsOfReachingTheAPISayWhatToDo(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("[]"))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHIFFON_API_CA_FILE", "")
	plain := "http://" + srv.Listener.Addr().String()
	cases := []struct {
		name   string
		server string
		args   []string
		want   string
	}{
		{"unknown CA", srv.URL, []string{"agents"}, "--api-ca-file"},
		{"plain HTTP", plain, []string{"agents"}, "use https://"},
		{"plain HTTP, an event stream", plain, []string{"watch", "t1"}, "use https://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args[:len(tc.args):len(tc.args)], "--server", tc.server, "--api-token-file", tokenFile)
			code, _, errOut := runCLI(t, "", args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want it to say %q", code, errOut, tc.want)
			}
		})
	}
}

// TestClientReadsTheTokenFileOfTheEnvironment: CHIFFON_API_TOKEN_FILE, which the
// orchestrator reads, names the CLI's token file too.
func TestClientReadsTheTokenFileOfTheEnvironment(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer from-file" {
			http.Error(w, `{"error":{"code":"unauthorized","message":"bad token"}}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("[]"))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHIFFON_API_TOKEN", "")
	t.Setenv("CHIFFON_API_TOKEN_FILE", tokenFile)
	t.Setenv("CHIFFON_DATA_DIR", t.TempDir()) // no up's token to fall back on
	code, out, errOut := runCLI(t, "", "agents", "--json", "--server", srv.URL)
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSubmitSaysATaskWaitsForApproval: a submit without --wait that leaves the
// task waiting for approval says so and how to approve it, on stderr; stdout
// keeps only the id.
func TestSubmitSaysATaskWaitsForApproval(t *testing.T) {
	const body = `{"id":"t-approve","state":"awaiting_approval","approval":{"state":"waiting","why":"work type reboot requires approval (work_types.reboot.approval)"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks":
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(body))
		case "/api/v1/work-types":
			_, _ = w.Write([]byte("[]"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, out, errOut := runCLI(t, "", "submit", "--to", "infra", "--work-type", "reboot", "--server", srv.URL)
	want := "task t-approve is waiting for approval (work type reboot requires approval (work_types.reboot.approval)): chiffon approve t-approve"
	if code != 0 || strings.TrimSpace(out) != "t-approve" || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	if hint := taskview.ApprovalHint(&task.Task{ID: "x", State: task.StateRunning}); hint != "" {
		t.Fatalf("a running task got the hint %q", hint)
	}
}

// TestSubmitAllSaysABatchWaitsForApproval: so does a submit --all whose batch
// waits for approval (asked once for all its tasks).
func TestSubmitAllSaysABatchWaitsForApproval(t *testing.T) {
	const body = `{"id":"b-approve","state":"awaiting_approval","to_agent":"infra","work_type":"reboot",
		"targets":[{"agent_id":"i1","state":"waiting"}],"approval":{"state":"waiting","why":"work type reboot requires approval"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/batches":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(body))
		case "/api/v1/work-types":
			_, _ = w.Write([]byte("[]"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, out, errOut := runCLI(t, "", "submit", "--to", "infra", "--work-type", "reboot", "--all", "--server", srv.URL)
	want := "batch b-approve is waiting for approval (work type reboot requires approval): chiffon approve b-approve"
	if code != 0 || strings.TrimSpace(out) != "b-approve" || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	if hint := taskview.BatchApprovalHint(&api.Batch{ID: "x", State: api.BatchRunning}); hint != "" {
		t.Fatalf("a running batch got the hint %q", hint)
	}
}

// TestInitPrintsAnAPIURLThatWorks: an API listening on every address is printed
// with the name in its certificate, not 0.0.0.0.
func TestInitPrintsAnAPIURLThatWorks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "infra=i1", "--broker-host", "nas.lan",
		"--listen", "0.0.0.0:18443")
	if code != 0 || !strings.Contains(out, "https://nas.lan:18443") || strings.Contains(out, "0.0.0.0:18443") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

// TestConfigCheckTellsTheBrokersConfig: broker.conf, nats-server's format and not
// YAML, is checked as the broker's config; a file that is neither says both.
func TestConfigCheckTellsTheBrokersConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "infra=i1", "--broker-host", "nas.lan"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, _ := runCLI(t, "", "config", "check", filepath.Join(dir, "broker.conf"))
	if code != 0 || !strings.Contains(out, "ok: broker") || !strings.Contains(out, "TLS") {
		t.Fatalf("broker.conf: exit %d:\n%s", code, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("id: x\n\tbad: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "config", "check", bad)
	if code != 1 || !strings.Contains(out, "not YAML") || !strings.Contains(out, "nats-server") {
		t.Fatalf("a file of neither kind: exit %d:\n%s", code, out)
	}
}
