package task_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func TestParseIDRefReadsFullShortAndPrefix(t *testing.T) {
	const id = "01a21b10-c6bc-7d2e-8f00-12345678abcd"
	tests := []struct {
		in, full, part string
		ok             bool
	}{
		{"01A21B10-C6BC-7D2E-8F00-12345678ABCD", id, "", true},
		{"5678ABCD", "", "5678abcd", true},         // a short id
		{"12345678abcd", "", "12345678abcd", true}, // the whole last group
		{"01a21b10", "", "01a21b10", true},         // a prefix as long as a short id
		{"01a21b10-c6", "", "01a21b10-c6", true},   // a longer prefix
		{"01a21b10-c6bc-7d2e-8f00-1234", "", "01a21b10-c6bc-7d2e-8f00-1234", true},
		{"5678abc", "", "", false},        // too short
		{"1234567890abcd", "", "", false}, // longer than a group, no '-'
		{"01a21b10-c6bc7", "", "", false}, // a prefix without its second dash
		{"01a21b1x", "", "", false},       // not hex
		{"../tasks", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range tests {
		full, part, ok := task.ParseIDRef(tc.in)
		if full != tc.full || part != tc.part || ok != tc.ok {
			t.Errorf("ParseIDRef(%q) = %q, %q, %v; want %q, %q, %v", tc.in, full, part, ok, tc.full, tc.part, tc.ok)
		}
	}
}

func TestMatchesIDByBeginningOrShortID(t *testing.T) {
	const id = "01a21b10-c6bc-7d2e-8f00-12345678abcd"
	for part, want := range map[string]bool{
		"5678abcd": true, "12345678abcd": true, "01a21b10": true, "01a21b10-c6bc": true,
		"5678abce": false, "01a21b11": false, "01a21b10-c6bd": false, "": false,
	} {
		if got := task.MatchesID(id, part); got != want {
			t.Errorf("MatchesID(%q) = %v, want %v", part, got, want)
		}
	}
	if got := task.ShortID(id); got != "5678abcd" {
		t.Errorf("ShortID = %q", got)
	}
}
