package core

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/requestsize"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestAWorkRequestWithoutParametersFitsEnvelopeRoom: requestsize.Bound adds
// EnvelopeRoom for the rest of the envelope, which the core builds
// (workRequestSize): at its largest it must fit.
func TestAWorkRequestWithoutParametersFitsEnvelopeRoom(t *testing.T) {
	// The rest of the envelope at its largest.
	env := envelope.New(envelope.Orchestrator, envelope.Research, envelope.NewID(), envelope.NewID(),
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: strings.Repeat("w", 64), Parameters: map[string]any{},
			Hints: &envelope.Hints{MaxDurationSeconds: math.MaxInt64, MaxMemoryMB: math.MaxInt64, AgentID: strings.Repeat("a", 64)}})
	gpu := int64(1 << 40) // the largest need the API takes
	env.XCustomFields = gpuFields(&task.Hints{GPUVRAMMB: &gpu})
	env.Timestamp = time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC)
	data, err := envelope.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	if len(data)-2 > requestsize.EnvelopeRoom { // "{}" is counted in the bound
		t.Fatalf("an envelope without parameters is %d bytes, over requestsize.EnvelopeRoom %d", len(data), requestsize.EnvelopeRoom)
	}
}
