package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chiffon agents says which orchestrator of a group leads, and says nothing of
// it for an orchestrator alone.
func TestAgentsSaysWhoLeads(t *testing.T) {
	cases := []struct {
		name, readyz, want string
	}{
		{"standby", `{"status":"ready","role":"standby","leader":{"name":"nas-1a2b","api":"https://nas:8443","term":"x","since":"2026-11-23T10:00:00Z","lease_ms":5000}}`,
			"Leader: nas-1a2b at https://nas:8443 (asked a standby; since 2026-11-23T10:00:00Z)"},
		{"leader", `{"status":"ready","role":"leader","leader":{"name":"nas-1a2b","term":"x","since":"2026-11-23T10:00:00Z","lease_ms":5000}}`,
			"Leader: nas-1a2b, the orchestrator asked"},
		{"no leader yet", `{"status":"ready","role":"standby"}`, "Leader: none yet"},
		{"alone", `{"status":"ready"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/api/v1/agents":
					_, _ = w.Write([]byte(`[{"id":"code-1","type":"code","state":"online","load":0,"capacity":2,"breaker":"closed","labels":{"site":"attic","gpu":"true"}}]`))
				case "/readyz":
					_, _ = w.Write([]byte(tc.readyz))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			tokenFile := filepath.Join(t.TempDir(), "api.token")
			if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI(t, "", "agents", "--server", srv.URL, "--api-token-file", tokenFile)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, "code-1") || !strings.Contains(out, "gpu=true,site=attic") {
				t.Fatalf("no agent table with its labels: %q", out)
			}
			if tc.want == "" && strings.Contains(out, "Leader") || tc.want != "" && !strings.Contains(out, tc.want) {
				t.Fatalf("output %q, want a leader line %q", out, tc.want)
			}
		})
	}
}

// chiffon agents shows each agent's limits in a compact LIMITS column, and "-"
// for an agent without any.
func TestAgentsShowsLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agents":
			_, _ = w.Write([]byte(`[{"id":"code-1","type":"code","state":"online","load":0,"capacity":2,"breaker":"closed",` +
				`"limits":{"max_concurrency":2,"rate_limit":"5/s","max_request_bytes":65536,"allowed_work_types":["build","test"]}},` +
				`{"id":"code-2","type":"code","state":"online","load":0,"capacity":4,"breaker":"closed"}]`))
		case "/readyz":
			_, _ = w.Write([]byte(`{"status":"ready"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "agents", "--server", srv.URL, "--api-token-file", tokenFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LIMITS") {
		t.Fatalf("agent table %q", out)
	}
	if !strings.Contains(lines[1], "5/s, ≤64KiB, cap 2, only build,test") {
		t.Errorf("code-1's limits not shown: %q", lines[1])
	}
	// code-2: the LIMITS column (the 9th) is "-".
	if f := strings.Fields(lines[2]); len(f) < 9 || f[8] != "-" {
		t.Errorf("code-2 without limits: %q, want - in LIMITS", lines[2])
	}
}

func TestSizeUnits(t *testing.T) {
	for n, want := range map[int64]string{65536: "64KiB", 1 << 20: "1MiB", 1500: "1500B", 3 << 20: "3MiB", 1536: "1536B"} {
		if got := sizeUnits(n); got != want {
			t.Errorf("sizeUnits(%d) = %q, want %q", n, got, want)
		}
	}
}
