package site

import (
	"slices"
	"testing"
)

// TestHostsOfAListener: which listen addresses stay on this machine, which mean
// every address, and that a named listener is reached by its own name.
func TestHostsOfAListener(t *testing.T) {
	for _, tc := range []struct {
		host               string
		loopback, wildcard bool
	}{
		{"127.0.0.1", true, false},
		{"::1", true, false},
		{"localhost", true, false},
		{"", false, true},
		{"0.0.0.0", false, true},
		{"::", false, true},
		{"nas.lan", false, false},
		{"192.168.1.10", false, false},
	} {
		if got := IsLoopback(tc.host); got != tc.loopback {
			t.Errorf("IsLoopback(%q) = %v", tc.host, got)
		}
		if got := IsWildcard(tc.host); got != tc.wildcard {
			t.Errorf("IsWildcard(%q) = %v", tc.host, got)
		}
		if tc.wildcard {
			continue
		}
		if names := ListenNames(tc.host); !slices.Equal(names, []string{tc.host}) {
			t.Errorf("ListenNames(%q) = %q", tc.host, names)
		}
		if got := AdvertisedHost(tc.host); got != tc.host {
			t.Errorf("AdvertisedHost(%q) = %q", tc.host, got)
		}
	}
	if h := AdvertisedHost("0.0.0.0"); h == "" || IsWildcard(h) {
		t.Errorf("AdvertisedHost(0.0.0.0) = %q", h)
	}
}
