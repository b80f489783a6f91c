package enrollcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/spf13/cobra"
)

var errUsage = errors.New("usage")

// testConfig is a Config whose client talks to srv.
func testConfig(srv *httptest.Server) Config {
	return Config{
		ClientFlags: func(*cobra.Command) (func() (*client.Client, error), func() bool) {
			return func() (*client.Client, error) {
					return &client.Client{BaseURL: srv.URL, Token: "t", HTTP: srv.Client()}, nil
				},
				func() bool { return false }
		},
		PrintJSON: func(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) },
		Usage:     func(msg string) error { return errors.Join(errUsage, errors.New(msg)) },
	}
}

// TestEnrollPrintsTheJoinLineWithTheFingerprint: chiffon enroll sends the
// id, type, labels and ttl, and prints the code and the whole line the new
// host runs; a label without "=" is a usage error that sends nothing.
func TestEnrollPrintsTheJoinLineWithTheFingerprint(t *testing.T) {
	var got api.EnrollRequest
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/enrollments" {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.EnrollCode{Code: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", CAFingerprint: "SHA256:AA:BB",
			Enrollment: api.Enrollment{AgentID: got.AgentID, Type: got.Type, ExpiresAt: time.Now().Add(time.Hour)}})
	}))
	defer srv.Close()
	cmd := EnrollCommand(testConfig(srv))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--id", "pi-1", "--type", "infra", "--label", "room=attic", "--ttl", "30m"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.AgentID != "pi-1" || got.Type != "infra" || got.Labels["room"] != "attic" || got.TTL != "30m" {
		t.Errorf("sent %+v", got)
	}
	want := "chiffon agent join --orchestrator " + srv.URL + " --ca-fingerprint SHA256:AA:BB ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	cmd = EnrollCommand(testConfig(srv))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--id", "pi-2", "--type", "infra", "--label", "room"})
	if err := cmd.Execute(); !errors.Is(err, errUsage) || calls != 1 {
		t.Errorf("a label without =: err %v, %d calls", err, calls)
	}
}

// TestEnrollNamesTheJoinURLOfItsConfig: the join line names the URL
// Config.JoinURL gives (the API's for other hosts), and the client's when it
// gives "".
func TestEnrollNamesTheJoinURLOfItsConfig(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.EnrollCode{Code: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", CAFingerprint: "SHA256:AA:BB",
			Enrollment: api.Enrollment{AgentID: "pi-1", Type: "infra", ExpiresAt: time.Now().Add(time.Hour)}})
	}))
	defer srv.Close()
	for given, want := range map[string]string{"https://192.0.2.7:8080": "https://192.0.2.7:8080", "": srv.URL} {
		cfg := testConfig(srv)
		cfg.JoinURL = func(*cobra.Command) string { return given }
		cmd := EnrollCommand(cfg)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--id", "pi-1", "--type", "infra"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if line := "chiffon agent join --orchestrator " + want + " --ca-fingerprint"; !strings.Contains(out.String(), line) {
			t.Errorf("JoinURL %q: output lacks %q:\n%s", given, line, out.String())
		}
	}
}

// TestJoinRefusesABadFingerprintBeforeAnything: a fingerprint that is not a
// SHA-256 is a usage error, and a plain http:// orchestrator is refused, both
// before any request.
func TestJoinRefusesABadFingerprintBeforeAnything(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
	defer srv.Close()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--orchestrator", "https://x", "--ca-fingerprint", "SHA256:12:34", "--dir", dir, "CODE"},
		{"--orchestrator", srv.URL, "--ca-fingerprint", strings.Repeat("ab", 32), "--dir", dir, "CODE"},
	} {
		cmd := JoinCommand(testConfig(srv))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil {
			t.Errorf("join %v succeeded", args)
		}
	}
	if calls != 0 {
		t.Errorf("%d requests reached the server", calls)
	}
}
