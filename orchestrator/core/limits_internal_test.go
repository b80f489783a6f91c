package core

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestParamsBoundIsAnUpperBound: checkSize skips encoding when the bound says a
// task is far from the limit, so the bound must never be below the encoding.
func TestParamsBoundIsAnUpperBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	nasty := []string{"\x00", "\x1f", "<", ">", "&", "\"", "\\", "\u2028", "\xff", "é", "a"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(nasty[rng.IntN(len(nasty))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(8); {
		case depth > 4 || k == 0:
			return str()
		case k == 1:
			return json.Number("-12345678901234567890")
		case k == 2:
			return -math.MaxFloat64
		case k == 3:
			return nil
		case k == 4:
			return rng.IntN(2) == 0
		case k == 5:
			l := make([]any, rng.IntN(5))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		params, _ := value(0).(map[string]any)
		if params == nil {
			params = map[string]any{str(): value(1)}
		}
		n, ok := paramsBound(params)
		data, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || n < len(data) {
			t.Fatalf("bound %d (ok %v) below the encoding's %d bytes: %s", n, ok, len(data), data)
		}
	}
	if _, ok := paramsBound(map[string]any{"x": struct{}{}}); ok {
		t.Fatal("a type whose size only encoding tells was bounded")
	}
	// The rest of the envelope fits envelopeRoom at its largest.
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
	if len(data)-2 > envelopeRoom { // "{}" is counted in the bound
		t.Fatalf("an envelope without parameters is %d bytes, over envelopeRoom %d", len(data), envelopeRoom)
	}
}
