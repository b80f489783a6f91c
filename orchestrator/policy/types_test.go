package policy

import (
	"slices"
	"testing"
)

// TestAnAgentsConfigTrimsItsRegistration: the work types an agent offers are
// trimmed to its allowed_work_types, and its capacity to its max_concurrency,
// at least 1; an agent not in the config (nil) keeps what it says.
func TestAnAgentsConfigTrimsItsRegistration(t *testing.T) {
	offered := []string{"echo", "build", "sleep"}
	cases := []struct {
		name          string
		conf          *AgentConfig
		kept, dropped []string
		n, capacity   int
	}{
		{"not in the config", nil, offered, nil, 8, 8},
		{"no limits", &AgentConfig{}, offered, nil, 8, 8},
		{"allowed work types", &AgentConfig{AllowedWorkTypes: []string{"sleep", "echo", "deploy"}},
			[]string{"echo", "sleep"}, []string{"build"}, 8, 8},
		{"max_concurrency below what it says", &AgentConfig{MaxConcurrency: 2}, offered, nil, 8, 2},
		{"max_concurrency above what it says", &AgentConfig{MaxConcurrency: 16}, offered, nil, 8, 8},
		{"at least one", nil, offered, nil, 0, 1},
		{"at least one, capped", &AgentConfig{MaxConcurrency: 3}, offered, nil, -1, 1},
	}
	for _, tc := range cases {
		kept, dropped := tc.conf.Allowed(offered)
		if !slices.Equal(kept, tc.kept) || !slices.Equal(dropped, tc.dropped) {
			t.Errorf("%s: kept %v, dropped %v; want %v, %v", tc.name, kept, dropped, tc.kept, tc.dropped)
		}
		if got := tc.conf.Capacity(tc.n); got != tc.capacity {
			t.Errorf("%s: capacity %d for %d, want %d", tc.name, got, tc.n, tc.capacity)
		}
	}
}
