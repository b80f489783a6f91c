package envelope_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", true},
		{"6F1C2A4E-9B3D-4C1E-8A2F-0D9E8C7B6A51", "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", true},
		{"", "", false},
		{"6f1c2a4e9b3d4c1e8a2f0d9e8c7b6a51", "", false},      // no dashes
		{"6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a5", "", false},   // short
		{"6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a511", "", false}, // long
		{"6f1c2a4e9-b3d-4c1e-8a2f-0d9e8c7b6a51", "", false},  // a dash out of place
		{"6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a5g", "", false},  // not hex
		{"{f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a5}", "", false},
	} {
		got, ok := envelope.ParseID(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseID(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
