package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator"
)

// firstReleaseConfig is the orchestrator config `chiffon init` of the first
// release wrote (tests/testdata/e70b8fb/site), shortened.
const firstReleaseConfig = `nats:
  urls: ['nats://127.0.0.1:4222']
token_file: /site/tokens/orchestrator.token
api_token_file: /site/tokens/api.token
data_dir: /var/lib/chiffon/orchestrator
agents:
  - id: infra-1
    token_file: /site/tokens/infra-1.token
  - id: nas
    type: infra
    token_file: /site/tokens/nas.token
`

// TestDecodeConfigNamesEveryChangeOfTheFirstRelease: a first release's config
// is refused with every change it needs at once, each naming its key (and a
// type guessed from an id init gave); a newer config_version is refused; this
// release's version and a file without one are read.
func TestDecodeConfigNamesEveryChangeOfTheFirstRelease(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // in the error; none: no error
		not        []string
	}{
		{"first release", firstReleaseConfig, []string{
			"this is the first release's orchestrator config",
			"remove token_file (line 3)",
			"agents[0] (infra-1): add type: infra, by its id",
			"agents[0] (infra-1): add orchestrator_token_file",
			"agents[1] (nas): add orchestrator_token_file",
			"chiffon init --force", "docs/upgrading.md",
		}, []string{"agents[1] (nas): add type"}},
		{"newer", "config_version: 3\ndata_dir: /d\napi_token_file: /t\n", []string{"config_version: 3 is a newer chiffon's; this build reads up to 2"}, nil},
		{"this release", "config_version: 2\ndata_dir: /d\napi_token_file: /t\n", nil, nil},
		{"unversioned", "data_dir: /d\napi_token_file: /t\n", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := orchestrator.DecodeConfig([]byte(tc.yaml))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error has %q:\n%v", n, err)
				}
			}
		})
	}
}
