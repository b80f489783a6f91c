package agent

import (
	"strings"
	"testing"
	"time"
)

func TestCancelGraceConfig(t *testing.T) {
	for _, tc := range []struct {
		key   string // the cancel_grace line of work type t; "" for none
		grace time.Duration
		err   string // what the error says; "" for none
	}{
		{"", DefaultCancelGrace, ""},
		{"cancel_grace: 0s", 0, ""},
		{"cancel_grace: 300ms", 300 * time.Millisecond, ""},
		{"cancel_grace: 10m", MaxCancelGrace, ""},
		{"cancel_grace: -1s", 0, "work_types.t: cancel_grace must not be negative"},
		{"cancel_grace: 10m1s", 0, "work_types.t: cancel_grace must be at most 10m0s, got 10m1s"},
		{"cancel_grace: soon", 0, `"soon" is not a duration`},
	} {
		name := tc.key
		if name == "" {
			name = "unset"
		}
		t.Run(name, func(t *testing.T) {
			text := `id: a1
type: code
nats: {urls: ["nats://127.0.0.1:4222"]}
token_file: /t
orchestrator_token_file: /o
data_dir: /d
work_types:
  t:
    shell: "true"
    ` + tc.key + "\n"
			cfg, err := ParseConfig([]byte(text))
			if err == nil {
				err = cfg.Validate()
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to say %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := newSubprocess("t", cfg.WorkTypes["t"])
			if err != nil {
				t.Fatal(err)
			}
			if s.grace != tc.grace {
				t.Fatalf("grace %v, want %v", s.grace, tc.grace)
			}
		})
	}
}
