package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/chiffon-dev/chiffon/internal/stack"
)

func TestVersionComesFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "unknown " + runtime.Version()},
		{"a module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 " + runtime.Version()},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "abc123", "vcs.time", "2026-01-19T04:21:04Z", "vcs.modified", "true")},
			"(devel) (abc123 2026-01-19T04:21:04Z, modified) " + runtime.Version()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := buildinfo.From(func() (*debug.BuildInfo, bool) { return tc.bi, tc.bi != nil }).String()
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	want := "chiffon " + buildinfo.Read().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, errOut := runCLI(t, "", args...); code != 0 || out != want {
			t.Errorf("chiffon %s: exit %d, %q %s; want %q", args[0], code, out, errOut, want)
		}
	}
}

func TestOrchestratorMetricsHaveBuildInfo(t *testing.T) {
	dir := t.TempDir()
	sc, err := localStack(localConfig{DataDir: dir, Host: "127.0.0.1", Log: newLogger(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	resp, err := http.Get(s.APIURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b := buildinfo.Read()
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	want := fmt.Sprintf(`chiffon_build_info{goversion=%q,revision=%q,version=%q} 1`, b.GoVersion, rev, b.Version)
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(body), "chiffon_build_info"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
