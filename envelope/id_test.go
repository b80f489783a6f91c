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

// NewID's ids are UUIDv7s, distinct across goroutines (their random bits come from
// a shared pool) and, from one goroutine, each greater than the one before.
func TestNewIDsAreDistinctOrderedV7s(t *testing.T) {
	const goroutines, each = 8, 2000
	ids := make([][]string, goroutines)
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				ids[g] = append(ids[g], envelope.NewID())
			}
		}()
	}
	for range goroutines {
		<-done
	}
	seen := map[string]bool{}
	for g, list := range ids {
		for i, id := range list {
			if _, ok := envelope.ParseID(id); !ok || id[14] != '7' {
				t.Fatalf("%q is not a canonical UUIDv7", id)
			}
			if seen[id] {
				t.Fatalf("%s made twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("goroutine %d: %s after %s", g, id, list[i-1])
			}
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = envelope.NewID()
	}
}
