package agent

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEchoRepeats: repeat returns the message that many times, and a repeat
// that is not a whole number from 1, or an output over 64 MiB, is refused.
func TestEchoRepeats(t *testing.T) {
	res, err := echoHandler(context.Background(), &Request{Parameters: map[string]any{"message": "ab\n", "repeat": 3.0}}, &progressRecorder{})
	if err != nil || res.Output != "ab\nab\nab\n" {
		t.Fatalf("repeat 3: %q, %v", res.Output, err)
	}
	for _, bad := range []any{0.0, 1.5, "x", float64(maxEchoOutput)} {
		if _, err := echoHandler(context.Background(), &Request{Parameters: map[string]any{"message": "ab", "repeat": bad}}, &progressRecorder{}); err == nil {
			t.Errorf("repeat %v taken", bad)
		}
	}
}

// TestSleepWritesALineEachSecond: while it sleeps, the sleep work type writes
// how long it has slept, so that its output grows as it runs.
func TestSleepWritesALineEachSecond(t *testing.T) {
	p := &progressRecorder{}
	res, err := sleepHandler(context.Background(), &Request{Parameters: map[string]any{"seconds": 2.2}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.out.String(); !strings.Contains(got, "1s of 2.2s\n") || !strings.Contains(got, "2s of 2.2s\n") {
		t.Fatalf("output while sleeping %q", got)
	}
	if res.Output != "slept "+(2200*time.Millisecond).String()+"\n" || len(p.percent) < 2 {
		t.Fatalf("result %q, percents %v", res.Output, p.percent)
	}
}
