package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const unknownID = "00000000-0000-0000-0000-000000000000"

// taskAPI answers for one task "t1": its output (not UTF-8 when binary), and 404 in
// the API's error shape for any other.
func taskAPI(t *testing.T, output string) (url, tokenFile string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tasks/t1/output" {
			w.Header().Set("X-Chiffon-Output-Complete", "true")
			_, _ = w.Write([]byte(output))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such task"}}`))
	}))
	t.Cleanup(srv.Close)
	tokenFile = filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokenFile, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, tokenFile
}

func TestErrorsUnderJSONAreJSONOnStderrWithTheirCode(t *testing.T) {
	clearClientEnv(t)
	url, tok := taskAPI(t, "")
	server := []string{"--server", url, "--api-token-file", tok}
	cases := []struct {
		name       string
		args       []string
		code       string
		httpStatus int
		exit       int
	}{
		{"an API error", append([]string{"task", unknownID, "--json"}, server...), "not_found", 404, 1},
		{"an API error of output", append([]string{"output", unknownID, "--json"}, server...), "not_found", 404, 1},
		{"a missing flag", []string{"submit", "--json", "--to", "code"}, errCodeUsage, 0, 2},
		{"an unknown flag after --json", []string{"tasks", "--json", "--frobnicate"}, errCodeUsage, 0, 2},
		{"an unknown flag before --json", []string{"tasks", "--frobnicate", "--json"}, errCodeUsage, 0, 2},
		{"no token", []string{"agents", "--json", "--server", url, "--data-dir", t.TempDir()}, errCodeCLI, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exit, out, errOut := runCLI(t, "", tc.args...)
			var e errorJSON
			dec := json.NewDecoder(strings.NewReader(errOut))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil || dec.More() {
				t.Fatalf("stderr is not one JSON error (%v): %q", err, errOut)
			}
			if exit != tc.exit || e.Error.ExitCode != tc.exit || e.Error.Code != tc.code || e.Error.HTTPStatus != tc.httpStatus || e.Error.Message == "" {
				t.Errorf("exit %d, %+v; want exit %d, code %s, HTTP %d", exit, e.Error, tc.exit, tc.code, tc.httpStatus)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	// Without --json the same errors stay plain text.
	if _, _, errOut := runCLI(t, "", append([]string{"task", unknownID}, server...)...); !strings.HasPrefix(errOut, "chiffon: no such task (HTTP 404)") {
		t.Errorf("plain error: %q", errOut)
	}
}

func TestOutputJSONPrintsTheOutputAsJSON(t *testing.T) {
	clearClientEnv(t)
	for _, tc := range []struct {
		name, output, want string
		base64             bool
	}{
		{"text", "out\nerr\n", "out\nerr\n", false},
		{"binary", "\xff\xfe", "//4=", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, tok := taskAPI(t, tc.output)
			code, out, errOut := runCLI(t, "", "output", "t1", "--json", "--server", url, "--api-token-file", tok)
			var o outputJSON
			if err := json.Unmarshal([]byte(out), &o); err != nil || code != 0 {
				t.Fatalf("exit %d, %v: %q %s", code, err, out, errOut)
			}
			if o != (outputJSON{ID: "t1", Output: tc.want, Complete: true, Base64: tc.base64}) {
				t.Errorf("got %+v", o)
			}
		})
	}
}
