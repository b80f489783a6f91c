package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
)

// clientCommands are the commands that talk to the orchestrator's API.
var clientCommands = []string{"submit", "tasks", "task", "output", "watch", "cancel", "agents"}

// fakeAPI answers GET /api/v1/agents with [] to the bearer token "tok", and 401 else.
func fakeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"error":{"code":"unauthorized","message":"bad token"}}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// upDataDir makes the files `chiffon up` leaves for clients in a new dir.
func upDataDir(t *testing.T, apiURL string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, apiURLFile), []byte(apiURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, apiTokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// clearClientEnv unsets every variable a client command reads.
func clearClientEnv(t *testing.T) {
	for _, k := range []string{"CHIFFON_SERVER", "CHIFFON_API_TOKEN", "CHIFFON_API_CA_FILE", clientDataDirEnv} {
		t.Setenv(k, "")
	}
}

func TestClientCommandsFindUpInTheDataDirOfFlagOrEnvironment(t *testing.T) {
	clearClientEnv(t)
	dir := upDataDir(t, fakeAPI(t).URL)
	t.Chdir(t.TempDir()) // no ./chiffon-data here

	cases := []struct {
		name string
		env  string
		args []string
		code int
		err  string
	}{
		{"flag", "", []string{"--data-dir", dir}, 0, ""},
		{"environment", dir, nil, 0, ""},
		{"flag over environment", t.TempDir(), []string{"--data-dir", dir}, 0, ""},
		{"a data dir without api.url", "", []string{"--data-dir", t.TempDir()}, 1, "no API address in "},
		{"neither", "", nil, 1, "--data-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(clientDataDirEnv, tc.env)
			code, out, errOut := runCLI(t, "", append([]string{"agents", "--json"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, errOut, tc.code, tc.err)
			}
			if code == 0 && strings.TrimSpace(out) != "[]" {
				t.Fatalf("stdout %q", out)
			}
		})
	}
}

func TestEveryClientCommandTakesDataDirAndDaemonsKeepTheirs(t *testing.T) {
	root := newRootCmd()
	for _, name := range clientCommands {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("%s: %v", name, err)
		}
		f := cmd.Flags().Lookup("data-dir")
		if f == nil || !strings.Contains(f.Usage, "api.url") || !strings.Contains(f.Usage, clientDataDirEnv) {
			t.Errorf("%s --data-dir: %+v", name, f)
		}
	}
	for name, meaning := range map[string]string{"agent": "dedupe cache", "orchestrator": "task store", "up": "task store"} {
		cmd, _, _ := root.Find([]string{name})
		if f := cmd.Flags().Lookup("data-dir"); f == nil || !strings.Contains(f.Usage, meaning) {
			t.Errorf("%s --data-dir is no longer its own data dir: %+v", name, f)
		}
	}
}

// TestUpPrintsClientLinesThatWork runs the lines `up` prints, from another directory
// and as from another host, against the API they name.
func TestUpPrintsClientLinesThatWork(t *testing.T) {
	clearClientEnv(t)
	api := fakeAPI(t)
	dir := upDataDir(t, api.URL)
	// up was given a relative --data-dir; its lines are run from elsewhere.
	t.Chdir(filepath.Dir(dir))
	var out bytes.Buffer
	upBanner{natsURL: "tls://127.0.0.1:4222", apiURL: api.URL, host: "127.0.0.1", dataDir: filepath.Base(dir), logPath: "chiffon.log"}.print(&out)
	t.Chdir(t.TempDir())

	var lines [][]string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "chiffon" && f[1] == "agents" {
			lines = append(lines, f[1:])
		}
	}
	if len(lines) != 2 || !strings.Contains(out.String(), "export "+clientDataDirEnv+"="+dir) {
		t.Fatalf("want a --data-dir line and a --server line:\n%s", out.String())
	}
	for _, args := range lines {
		if code, stdout, stderr := runCLI(t, "", append(args, "--json")...); code != 0 || strings.TrimSpace(stdout) != "[]" {
			t.Errorf("chiffon %s: exit %d, %q %s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if !strings.Contains(out.String(), "--host") || !strings.HasSuffix(out.String(), "Press Ctrl-C to stop.\n") {
		t.Errorf("banner:\n%s", out.String())
	}
}

func TestConnectionRefusedSaysHowToPointTheCLIAtAServer(t *testing.T) {
	clearClientEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range clientCommands {
		t.Run(name, func(t *testing.T) {
			args := []string{name, "--server", addr, "--api-token-file", tok}
			switch name {
			case "submit":
				args = append(args, "--to", "code", "--work-type", "echo")
			case "task", "output", "watch", "cancel":
				args = append(args, "00000000-0000-0000-0000-000000000000")
			}
			code, _, errOut := runCLI(t, "", args...)
			for _, want := range []string{"connection refused", "--server", "CHIFFON_SERVER", "--data-dir", clientDataDirEnv} {
				if code != 1 || !strings.Contains(errOut, want) {
					t.Errorf("exit %d, stderr %q lacks %q", code, errOut, want)
				}
			}
			code, _, errOut = runCLI(t, "", append(args, "--json")...)
			var e errorJSON
			if err := json.Unmarshal([]byte(errOut), &e); err != nil || e.Error.Code != errCodeUnreachable || e.Error.ExitCode != 1 || code != 1 {
				t.Errorf("--json: exit %d, stderr %q (%v)", code, errOut, err)
			}
		})
	}
}

// TestClientCommandsTrustTheSiteCAOfTheDataDir: an up serving HTTPS (--host beyond
// loopback) is reached from its data dir with no CA flag: the data dir's site CA
// is trusted, and only it.
func TestClientCommandsTrustTheSiteCAOfTheDataDir(t *testing.T) {
	clearClientEnv(t)
	api := fakeAPI(t) // over plain HTTP; served again over TLS below
	srv := httptest.NewUnstartedServer(api.Config.Handler)
	dir := upDataDir(t, "")
	secrets := filepath.Join(dir, "secrets")
	if _, _, err := broker.EnsureCA(secrets); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := broker.EnsureNamedServerCert(secrets, "api", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(dir, apiURLFile), []byte(srv.URL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "", "agents", "--json", "--data-dir", dir); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("agents --data-dir over https: exit %d, %q %s", code, out, errOut)
	}
	// Another server, whose certificate the site CA did not sign, is refused.
	other := httptest.NewTLSServer(api.Config.Handler)
	t.Cleanup(other.Close)
	if err := os.WriteFile(filepath.Join(dir, apiURLFile), []byte(other.URL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "agents", "--json", "--data-dir", dir); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("a server outside the site CA: exit %d: %s", code, errOut)
	}
}
