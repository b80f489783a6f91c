package main

import (
	"reflect"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/examples"
	"github.com/chiffon-dev/chiffon/worktype"
)

// TestSubmitTypesTheExamplePlaybooksParams: the example infra agent's
// run_playbook takes its parameters from --param as docs/agent.md shows them:
// a single option is a one-item extra_args, commas make more, and k:=JSON
// gives the list as it is.
func TestSubmitTypesTheExamplePlaybooksParams(t *testing.T) {
	clearClientEnv(t)
	b, err := examples.AgentConfig("infra")
	if err != nil {
		t.Fatal(err)
	}
	c, err := agent.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	list := []api.WorkType{{AgentType: "infra", Name: "run_playbook",
		Spec: worktype.Spec{Parameters: c.WorkTypes["run_playbook"].Schema}, Agents: []string{"infra-1"}}}
	cases := []struct {
		params []string
		want   map[string]any
	}{
		{[]string{"playbook=site.yml"}, map[string]any{"playbook": "site.yml"}},
		{[]string{"playbook=site.yml", "extra_args=--check"}, map[string]any{"playbook": "site.yml", "extra_args": []any{"--check"}}},
		{[]string{"playbook=site.yml", "extra_args=--check,--diff", "limit=web"},
			map[string]any{"playbook": "site.yml", "extra_args": []any{"--check", "--diff"}, "limit": "web"}},
		{[]string{"playbook=site.yml", `extra_args:=["--check"]`}, map[string]any{"playbook": "site.yml", "extra_args": []any{"--check"}}},
	}
	for _, tc := range cases {
		rec, server := catalogueAPI(t, list, accepted)
		args := []string{"submit", "--to", "infra", "--work-type", "run_playbook"}
		for _, p := range tc.params {
			args = append(args, "--param", p)
		}
		if code, _, errOut := runCLI(t, "", append(args, server...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.params, code, errOut)
		}
		if got := postedParams(t, rec); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: parameters %#v, want %#v", tc.params, got, tc.want)
		}
	}
	rec, server := catalogueAPI(t, list, accepted)
	args := []string{"submit", "--to", "infra", "--work-type", "run_playbook", "--param", "playbook=site.yml", "--param", "extra_args=--force"}
	if code, _, errOut := runCLI(t, "", append(args, server...)...); code != exitParamError || rec.count("POST ") != 0 {
		t.Errorf("extra_args=--force: exit %d (%s), want %d and nothing posted", code, errOut, exitParamError)
	}
}
