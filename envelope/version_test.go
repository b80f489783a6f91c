package envelope_test

import (
	"errors"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

func TestNegotiatePicksTheLowestCommonVersion(t *testing.T) {
	tests := []struct {
		name         string
		ours, theirs []string
		want         string
	}{
		{"same single version", []string{"1.0"}, []string{"1.0"}, "1.0"},
		{"they also speak a newer one", []string{"1.0"}, []string{"1.0", "2.0"}, "1.0"},
		{"we also speak a newer one", []string{"1.0", "2.0"}, []string{"2.0", "1.0"}, "1.0"},
		{"lowest common, not lowest overall", []string{"1.1", "1.2", "2.0"}, []string{"1.0", "1.2", "2.0"}, "1.2"},
		{"numeric, not lexical order", []string{"1.2", "1.10"}, []string{"1.10", "1.2"}, "1.2"},
		{"only a newer one in common", []string{"1.0", "2.0"}, []string{"2.0", "3.0"}, "2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.Negotiate(tt.ours, tt.theirs)
			if err != nil || got != tt.want {
				t.Errorf("Negotiate(%v, %v) = %q, %v; want %q", tt.ours, tt.theirs, got, err, tt.want)
			}
		})
	}
}

func TestNegotiateWithNoCommonVersionIs5006(t *testing.T) {
	tests := []struct {
		name         string
		ours, theirs []string
	}{
		{"disjoint", []string{"1.0"}, []string{"2.0", "3.0"}},
		{"they name none", []string{"1.0"}, nil},
		{"malformed", []string{"1.0"}, []string{"1", "v1.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.Negotiate(tt.ours, tt.theirs)
			if got != "" || !errors.Is(err, errcodes.UnsupportedWorkType) {
				t.Fatalf("Negotiate = %q, %v; want a 5006", got, err)
			}
			var e *errcodes.Error
			if !errors.As(err, &e) || e.Retryable() {
				t.Fatalf("error %v is not a non-retryable *errcodes.Error", err)
			}
			if s, _ := e.Context[errcodes.KeySupportedTypes].([]string); len(s) != len(tt.ours) {
				t.Errorf("supported_types = %v, want %v", e.Context[errcodes.KeySupportedTypes], tt.ours)
			}
		})
	}
}

func TestSupportedVersionsNegotiateToTheWrittenVersion(t *testing.T) {
	got, err := envelope.Negotiate(envelope.SupportedVersions, []string{"1.0", "2.0"})
	if err != nil || got != envelope.ProtocolVersion {
		t.Errorf("Negotiate = %q, %v; want %q", got, err, envelope.ProtocolVersion)
	}
}
