package envelope_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

func TestDecodeWorkRequestRules(t *testing.T) {
	req := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkRequest, edits...) }
	wt := func(v any) []byte { return req(set("payload.work_type", v)) }
	hint := func(k string, v any) []byte { return req(set("payload.hints."+k, v)) }
	payload := func(e *envelope.Envelope) *envelope.WorkRequest { return e.Payload.(*envelope.WorkRequest) }

	cases := []decodeCase{
		validThen("spec example", req(), func(t *testing.T, e *envelope.Envelope) {
			p := payload(e)
			want := &envelope.Hints{MaxDurationSeconds: 300, MaxMemoryMB: 512}
			if p.TaskID != taskID || p.WorkType != "run_playbook" || !reflect.DeepEqual(p.Hints, want) {
				t.Errorf("payload = %+v, hints %+v", p, p.Hints)
			}
			if p.Parameters["playbook"] != "deploy_kuma.yml" {
				t.Errorf("parameters = %v", p.Parameters)
			}
		}),
		validThen("only the required fields; parameters default to {}", req(del("payload.parameters"), del("payload.hints")),
			func(t *testing.T, e *envelope.Envelope) {
				p := payload(e)
				if p.Parameters == nil || len(p.Parameters) != 0 || p.Hints != nil {
					t.Errorf("parameters = %#v, hints = %#v; want {} and nil", p.Parameters, p.Hints)
				}
			}),
		valid("empty parameters", req(set("payload.parameters", map[string]any{}))),
		valid("empty hints", req(set("payload.hints", map[string]any{}))),
		valid("max hints of 1", req(set("payload.hints", map[string]any{"max_duration_seconds": 1, "max_memory_mb": 1}))),
		validThen("other hints are kept", req(set("payload.hints.zone", "rack-2"), set("payload.hints.agent_id", "infra-01")),
			func(t *testing.T, e *envelope.Envelope) {
				h := payload(e).Hints
				if h.AgentID != "infra-01" || string(h.Extra["zone"]) != `"rack-2"` {
					t.Errorf("hints = %+v", h)
				}
			}),
		valid("work_type one letter", wt("a")),
		valid("work_type digits and underscores", wt("run_playbook_2")),
		valid("work_type 64 characters", wt("a"+strings.Repeat("b", 63))),

		invalid("work_type missing", "payload.work_type", req(del("payload.work_type"))),
		invalid("work_type null", "payload.work_type", wt(nil)),
		invalid("work_type empty", "payload.work_type", wt("")),
		invalid("work_type 65 characters", "payload.work_type", wt("a"+strings.Repeat("b", 64))),
		invalid("work_type upper case", "payload.work_type", wt("Run_playbook")),
		invalid("work_type starts with a digit", "payload.work_type", wt("2run")),
		invalid("work_type starts with _", "payload.work_type", wt("_run")),
		invalid("work_type with a hyphen", "payload.work_type", wt("run-playbook")),
		invalid("work_type with a space", "payload.work_type", wt("run playbook")),
		invalid("work_type with a dot", "payload.work_type", wt("run.playbook")),
		invalid("work_type non-ASCII", "payload.work_type", wt("rün")),
		invalid("work_type number", "payload.work_type", wt(raw(`7`))),
		invalid("task_id missing", "payload.task_id", req(del("payload.task_id"))),
		invalid("task_id not a UUID", "payload.task_id", req(set("payload.task_id", "task-1"))),
		invalid("parameters null", "payload.parameters", req(set("payload.parameters", nil))),
		invalid("parameters array", "payload.parameters", req(set("payload.parameters", []any{"a"}))),
		invalid("parameters string", "payload.parameters", req(set("payload.parameters", "a=b"))),
		invalid("hints null", "payload.hints", req(set("payload.hints", nil))),
		invalid("hints array", "payload.hints", req(set("payload.hints", []any{}))),
		invalid("hints agent_id with a dot", "payload.hints.agent_id", hint("agent_id", "infra.01")),
		invalid("hints agent_id empty", "payload.hints.agent_id", hint("agent_id", "")),
		invalid("unknown payload key", "payload.priority", req(set("payload.priority", 5))),
	}
	for _, k := range []string{"max_duration_seconds", "max_memory_mb"} {
		for name, v := range map[string]any{
			"zero": 0, "negative": -1, "fraction": raw(`1.5`), "integral float": raw(`300.0`),
			"exponent": raw(`3e2`), "string": "300", "null": nil, "boolean": true,
			"past int64": raw(`9223372036854775808`),
		} {
			cases = append(cases, invalid(k+" "+name, "payload.hints."+k, hint(k, v)))
		}
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeWorkStatusRules(t *testing.T) {
	st := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkStatus, edits...) }
	cases := []decodeCase{
		validThen("spec example", st(), func(t *testing.T, e *envelope.Envelope) {
			want := &envelope.WorkStatus{TaskID: taskID, Status: "running", ProgressPercent: 50,
				Step: envelope.Step{Number: 2, Name: "Configure Kuma settings", Output: "Updating config.yaml...\n"}}
			if !reflect.DeepEqual(e.Payload, want) {
				t.Errorf("payload = %+v, want %+v", e.Payload, want)
			}
		}),
		valid("status step_completed", st(set("payload.status", "step_completed"))),
		valid("status paused", st(set("payload.status", "paused"))),
		valid("progress 0", st(set("payload.progress_percent", 0))),
		valid("progress 100", st(set("payload.progress_percent", 100))),
		valid("step number 0", st(set("payload.step.number", 0))),
		valid("empty step name", st(set("payload.step.name", ""))),
		valid("empty output", st(set("payload.step.output", ""))),

		invalid("status completed", "payload.status", st(set("payload.status", "completed"))),
		invalid("status heartbeat", "payload.status", st(set("payload.status", "heartbeat"))),
		invalid("status upper case", "payload.status", st(set("payload.status", "Running"))),
		invalid("status empty", "payload.status", st(set("payload.status", ""))),
		invalid("progress -1", "payload.progress_percent", st(set("payload.progress_percent", -1))),
		invalid("progress 101", "payload.progress_percent", st(set("payload.progress_percent", 101))),
		invalid("progress fraction", "payload.progress_percent", st(set("payload.progress_percent", 50.5))),
		invalid("progress string", "payload.progress_percent", st(set("payload.progress_percent", "50"))),
		invalid("step array", "payload.step", st(set("payload.step", []any{}))),
		invalid("step string", "payload.step", st(set("payload.step", "2"))),
		invalid("step number -1", "payload.step.number", st(set("payload.step.number", -1))),
		invalid("step number 2.0", "payload.step.number", st(set("payload.step.number", raw(`2.0`)))),
		invalid("step number string", "payload.step.number", st(set("payload.step.number", "2"))),
		invalid("step name number", "payload.step.name", st(set("payload.step.name", 2))),
		invalid("step output array", "payload.step.output", st(set("payload.step.output", []any{"a"}))),
		invalid("unknown step key", "payload.step.log", st(set("payload.step.log", "x"))),
		invalid("unknown payload key", "payload.heartbeat", st(set("payload.heartbeat", true))),
	}
	// Every field the notes do not mark optional is required and never null.
	for _, f := range []string{"task_id", "status", "progress_percent", "step", "step.number", "step.name", "step.output"} {
		cases = append(cases,
			invalid(f+" missing", "payload."+f, st(del("payload."+f))),
			invalid(f+" null", "payload."+f, st(set("payload."+f, nil))),
		)
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeWorkResultRules(t *testing.T) {
	res := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkResult, edits...) }
	outcome := func(status string, code int) []byte {
		return res(set("payload.status", status), set("payload.exit_code", code))
	}
	cases := []decodeCase{
		validThen("spec example", res(), func(t *testing.T, e *envelope.Envelope) {
			want := &envelope.WorkResult{TaskID: taskID, Status: "success", Output: "Deployment completed successfully.\n",
				ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: 87, CPUTimeMS: 12450}}
			if !reflect.DeepEqual(e.Payload, want) {
				t.Errorf("payload = %+v, want %+v", e.Payload, want)
			}
		}),
		valid("success 0", outcome("success", 0)),
		valid("failed 1", outcome("failed", 1)),
		valid("failed 137", outcome("failed", 137)),
		valid("failed -1", outcome("failed", -1)),
		valid("cancelled 0", outcome("cancelled", 0)),
		valid("cancelled 130", outcome("cancelled", 130)),
		validThen("output absent defaults to empty", res(del("payload.output")), func(t *testing.T, e *envelope.Envelope) {
			if out := e.Payload.(*envelope.WorkResult).Output; out != "" {
				t.Errorf("output = %q", out)
			}
		}),
		valid("resources_used absent", res(del("payload.resources_used"))),
		valid("resources_used empty", res(set("payload.resources_used", map[string]any{}))),
		valid("resources_used zeros", res(set("payload.resources_used", map[string]any{"duration_seconds": 0, "gpu_vram_mb": 0, "cpu_time_ms": 0}))),
		valid("output of exactly 1 MiB with a larger limit", res(set("payload.output", strings.Repeat("x", envelope.MaxOutputSize)))),

		invalid("success with exit_code 1", "payload.exit_code", outcome("success", 1)),
		invalid("success with exit_code -1", "payload.exit_code", outcome("success", -1)),
		invalid("failed with exit_code 0", "payload.exit_code", outcome("failed", 0)),
		invalid("status completed", "payload.status", outcome("completed", 0)),
		invalid("status running", "payload.status", outcome("running", 0)),
		invalid("status upper case", "payload.status", outcome("SUCCESS", 0)),
		invalid("exit_code fraction", "payload.exit_code", res(set("payload.exit_code", 0.5))),
		invalid("exit_code 0.0", "payload.exit_code", res(set("payload.exit_code", raw(`0.0`)))),
		invalid("exit_code string", "payload.exit_code", res(set("payload.exit_code", "0"))),
		invalid("exit_code boolean", "payload.exit_code", res(set("payload.exit_code", false))),
		invalid("output null", "payload.output", res(set("payload.output", nil))),
		invalid("output number", "payload.output", res(set("payload.output", 1))),
		invalid("resources_used null", "payload.resources_used", res(set("payload.resources_used", nil))),
		invalid("resources_used array", "payload.resources_used", res(set("payload.resources_used", []any{}))),
		invalid("resources_used unknown key", "payload.resources_used.memory_mb", res(set("payload.resources_used.memory_mb", 1))),
		invalid("unknown payload key", "payload.error", res(set("payload.error", "x"))),
	}
	for _, f := range []string{"task_id", "status", "exit_code"} {
		cases = append(cases,
			invalid(f+" missing", "payload."+f, res(del("payload."+f))),
			invalid(f+" null", "payload."+f, res(set("payload."+f, nil))),
		)
	}
	for _, f := range []string{"duration_seconds", "gpu_vram_mb", "cpu_time_ms"} {
		p := "payload.resources_used." + f
		cases = append(cases,
			invalid(f+" negative", p, res(set(p, -1))),
			invalid(f+" fraction", p, res(set(p, 1.5))),
			invalid(f+" string", p, res(set(p, "1"))),
			invalid(f+" null", p, res(set(p, nil))),
		)
	}
	runDecodeCases(t, &envelope.Decoder{MaxSize: 2 << 20}, cases)
}

func TestDecodeErrorRules(t *testing.T) {
	er := func(edits ...edit) []byte { return envJSON(envelope.TypeError, edits...) }
	code := func(v any) []byte { return er(set("payload.error_code", v)) }
	cases := []decodeCase{
		validThen("spec example", er(), func(t *testing.T, e *envelope.Envelope) {
			p := e.Payload.(*envelope.ErrorPayload)
			want := map[string]any{"limit_name": "gpu_vram_mb", "available": json.Number("128"), "required": json.Number("512")}
			if p.ErrorCode != 5005 || p.ErrorMessage != "Resource limit exceeded" || !reflect.DeepEqual(p.ErrorContext, want) {
				t.Errorf("payload = %+v", p)
			}
		}),
		valid("code 5001", code(5001)),
		valid("code 5999", code(5999)),
		valid("code 5500, unnamed", code(5500)),
		valid("no error_context", er(del("payload.error_context"))),
		valid("null inside error_context", er(set("payload.error_context", map[string]any{"agent_id": "infra-01", "last_heartbeat": nil}))),
		valid("one-character message", er(set("payload.error_message", "x"))),

		invalid("code 5000", "payload.error_code", code(5000)),
		invalid("code 6000", "payload.error_code", code(6000)),
		invalid("code 0", "payload.error_code", code(0)),
		invalid("code -5003", "payload.error_code", code(-5003)),
		invalid("code 5003.0", "payload.error_code", code(raw(`5003.0`))),
		invalid("code string", "payload.error_code", code("5003")),
		invalid("message empty", "payload.error_message", er(set("payload.error_message", ""))),
		invalid("message number", "payload.error_message", er(set("payload.error_message", 5003))),
		invalid("context null", "payload.error_context", er(set("payload.error_context", nil))),
		invalid("context array", "payload.error_context", er(set("payload.error_context", []any{}))),
		invalid("context string", "payload.error_context", er(set("payload.error_context", "x"))),
		invalid("unknown payload key", "payload.retry", er(set("payload.retry", true))),
	}
	for _, f := range []string{"error_code", "error_message"} {
		cases = append(cases,
			invalid(f+" missing", "payload."+f, er(del("payload."+f))),
			invalid(f+" null", "payload."+f, er(set("payload."+f, nil))),
		)
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}
