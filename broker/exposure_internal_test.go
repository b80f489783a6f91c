package broker

import (
	"slices"
	"testing"
)

// TestExposureNamesWhatIsOpen: beyond loopback, a connection without an
// identity and one known to run without TLS are named; loopback, or an
// identified connection over TLS, has nothing open.
func TestExposureNamesWhatIsOpen(t *testing.T) {
	cases := []struct {
		host                        string
		identified, encrypted, know bool
		want                        []string
	}{
		{"nas.lan", false, false, true, []string{riskNoIdentity, riskNoTLS}},
		{"192.0.2.7", true, false, true, []string{riskNoTLS}},
		{"192.0.2.7", false, true, true, []string{riskNoIdentity}},
		{"192.0.2.7", true, true, true, nil},
		{"192.0.2.7", true, false, false, nil}, // not connected yet: TLS unknown
		{"127.0.0.1", false, false, true, nil},
		{"localhost", false, false, true, nil},
		{"::1", false, false, true, nil},
	}
	for _, tc := range cases {
		if got := exposure(tc.host, tc.identified, tc.encrypted, tc.know); !slices.Equal(got, tc.want) {
			t.Errorf("exposure(%s, identified %v, tls %v/%v) = %q, want %q", tc.host, tc.identified, tc.encrypted, tc.know, got, tc.want)
		}
	}
}
