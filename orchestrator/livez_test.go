package orchestrator_test

import (
	"testing"
)

// TestLivezAnswersWhileTheProcessRunsEvenWhenNotReady: /livez, like a Kubernetes
// liveness probe, answers 200 without a token whatever the orchestrator's state, so a
// broker outage or a shutdown in progress never gets the process restarted; /readyz is
// the one that says 503.
func TestLivezAnswersWhileTheProcessRunsEvenWhenNotReady(t *testing.T) {
	cases := []struct {
		name      string
		breakIt   func(t *testing.T, e *env)
		wantReady int
	}{
		{"open and connected", func(*testing.T, *env) {}, 200},
		{"broker down", func(t *testing.T, e *env) {
			e.srv.Shutdown()
			waitFor(t, "not ready", func() bool { return !e.o.Ready() })
		}, 503},
		{"closed", func(_ *testing.T, e *env) { e.o.Close() }, 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "code-1")
			o := e.open()
			c := e.client(o)
			tc.breakIt(t, e)
			if status, body := call(t, c, "GET", "/livez", "", ""); status != 200 || body != "{\"status\":\"ok\"}\n" {
				t.Errorf("livez: %d %q", status, body)
			}
			if status, _ := call(t, c, "GET", "/readyz", "", ""); status != tc.wantReady {
				t.Errorf("readyz: %d, want %d", status, tc.wantReady)
			}
		})
	}
}
