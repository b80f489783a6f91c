package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the chiffon CLI in-process and returns its exit code and output.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

const validLine = `{"protocol_version":"1.0","message_id":"550e8400-e29b-41d4-a716-446655440001","from_agent":"orchestrator","to_agent":"infra","timestamp":"2026-01-19T04:21:04Z","trace_id":"550e8400-e29b-41d4-a716-446655440002","request_id":"550e8400-e29b-41d4-a716-446655440003","type":"work_request","payload":{"task_id":"550e8400-e29b-41d4-a716-446655440004","work_type":"run_playbook","parameters":{"playbook":"deploy_kuma.yml"},"hints":{"max_duration_seconds":300}}}`

func TestEnvelopeValidatePrintsOneLinePerMessage(t *testing.T) {
	badTime := strings.Replace(validLine, "04:21:04Z", "04:21:04", 1)
	badVersion := strings.Replace(validLine, `"1.0"`, `"2.0"`, 1)
	input := strings.Join([]string{validLine, "", "[1,2]", "not json", badTime, badVersion}, "\n")

	code, out, _ := runCLI(t, input, "envelope", "validate")

	want := []string{
		"ok",
		"invalid 5003 -: message is not a JSON object, got array",
		"invalid 5003 -: message is not valid JSON",
		"invalid 5003 timestamp: ",
		"invalid 5006 protocol_version: ",
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i+1, lines[i], w)
		}
	}
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
}

func TestEnvelopeValidateExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte(validLine+"\n"+validLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"all ok", []string{good}, 0},
		{"missing file", []string{filepath.Join(dir, "absent")}, 2},
		{"unknown flag", []string{"--bogus"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, _ := runCLI(t, "", append([]string{"envelope", "validate"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
		})
	}
}

func TestEnvelopeValidateReadsAPrettyPrintedFile(t *testing.T) {
	code, pretty, _ := runCLI(t, "", "envelope", "new", "--to", "infra", "--work-type", "echo", "--param", "message=hi", "--pretty")
	if code != 0 {
		t.Fatalf("envelope new exit code = %d", code)
	}
	if strings.Count(pretty, "\n") < 5 {
		t.Fatalf("not pretty-printed:\n%s", pretty)
	}
	path := filepath.Join(t.TempDir(), "one.json")
	if err := os.WriteFile(path, []byte(pretty), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "", "envelope", "validate", path)
	if code != 0 || out != "ok\n" {
		t.Fatalf("validate = %d %q, want 0 \"ok\\n\"", code, out)
	}
}

func TestEnvelopeValidateAcceptsLinesOverOneMiB(t *testing.T) {
	long := strings.Replace(validLine, `"deploy_kuma.yml"`, `"`+strings.Repeat("x", 2<<20)+`"`, 1)
	code, out, _ := runCLI(t, long+"\n"+validLine+"\n", "envelope", "validate", "-")
	want := fmt.Sprintf("invalid 5003 payload: envelope is %d bytes, over the 1048576-byte limit\nok\n", len(long))
	if code != 1 || out != want {
		t.Fatalf("validate = %d %q", code, out)
	}
}

func TestEnvelopeNewBuildsValidMessages(t *testing.T) {
	tests := [][]string{
		{"--to", "infra", "--work-type", "run_playbook", "--param", "playbook=site.yml", "--param", "forks:=5", "--hint", "max_duration_seconds=300", "--hint", "agent_id=pi-1"},
		{"--to", "code", "--work-type", "run_tests", "--params-json", `{"repo":"/srv/app","args":["-v"]}`},
		{"--type", "cancel", "--to", "research", "--task-id", "550e8400-e29b-41d4-a716-446655440004"},
		{"--type", "ping", "--to", "desktop"},
		{"--type", "drain", "--to", "desktop"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append([]string{"envelope", "new"}, args...)...)
			if code != 0 {
				t.Fatalf("exit code %d: %s", code, errOut)
			}
			code, res, _ := runCLI(t, out, "envelope", "validate")
			if code != 0 || res != "ok\n" {
				t.Fatalf("built envelope does not validate: %s\n%s", res, out)
			}
		})
	}
}

func TestEnvelopeNewRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no to", []string{"--work-type", "echo"}, `required flag(s) "to"`},
		{"bad work type", []string{"--to", "infra", "--work-type", "Run-It"}, "payload.work_type"},
		{"bad param", []string{"--to", "infra", "--work-type", "echo", "--param", "novalue"}, "--param"},
		{"bad hint", []string{"--to", "infra", "--work-type", "echo", "--hint", "max_memory_mb=lots"}, "max_memory_mb"},
		{"bad type", []string{"--to", "infra", "--type", "work_result"}, "--type"},
		{"cancel without task", []string{"--to", "infra", "--type", "cancel"}, "payload.task_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", append([]string{"envelope", "new"}, tt.args...)...)
			if code != 2 || !strings.Contains(errOut, tt.msg) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.msg)
			}
		})
	}
}
