package core

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/catalog"
	"github.com/chiffon-dev/chiffon/worktype"
)

// TestRoutingCarriesTheAgentsStopGrace: the machine is told the stop grace
// the chosen agent declares for the task's work type (its cancel_grace), 0
// for a work type it declares none for, so that the deadline waits for the
// result of a task stopped gracefully.
func TestRoutingCarriesTheAgentsStopGrace(t *testing.T) {
	a := &agentEntry{id: "infra-1", version: "1.0", cat: catalog.NewAgent("infra", []string{"run_playbook", "echo"},
		map[string]worktype.Declared{"run_playbook": {Spec: worktype.Spec{StopGraceMS: 30000}}, "echo": {}}, nil)}
	for _, tc := range []struct {
		workType string
		want     time.Duration
	}{{"run_playbook", 30 * time.Second}, {"echo", 0}, {"unknown", 0}} {
		if got := (pickResult{agent: a}).routed(tc.workType); got.agentID != "infra-1" || got.stopGrace != tc.want {
			t.Errorf("%s: routed %+v, want a stop grace of %s", tc.workType, got, tc.want)
		}
	}
}
