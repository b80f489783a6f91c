package envelope_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// payloadIs checks the decoded payload against want.
func payloadIs(want envelope.Payload) func(*testing.T, *envelope.Envelope) {
	return func(t *testing.T, e *envelope.Envelope) {
		if !reflect.DeepEqual(e.Payload, want) {
			t.Errorf("payload = %+v, want %+v", e.Payload, want)
		}
	}
}

// requiredFields adds a missing and a null case for each required field of typ.
func requiredFields(typ envelope.Type, fields ...string) []decodeCase {
	var cases []decodeCase
	for _, f := range fields {
		p := "payload." + f
		cases = append(cases,
			invalid(f+" missing", p, envJSON(typ, del(p))),
			invalid(f+" null", p, envJSON(typ, set(p, nil))),
		)
	}
	return cases
}

var machine = &envelope.Resources{CPUCores: 4, MemoryMB: 8192, DiskFreeMB: 20480}

func TestDecodeRegisterRules(t *testing.T) {
	typ := envelope.TypeRegister
	reg := func(edits ...edit) []byte { return envJSON(typ, edits...) }
	cases := []decodeCase{
		validThen("every field", reg(), payloadIs(&envelope.Register{
			AgentID: "infra-01", Name: "rack-host-1", SupportedVersions: []string{"1.0"},
			WorkTypes: []string{"run_playbook", "deploy_service"}, Capabilities: []string{"ansible"},
			MaxConcurrency: 2, HeartbeatIntervalMS: 5000, Resources: machine,
		})),
		validThen("required fields only", reg(del("payload.name"), del("payload.capabilities"), del("payload.resources")),
			payloadIs(&envelope.Register{
				AgentID: "infra-01", SupportedVersions: []string{"1.0"}, WorkTypes: []string{"run_playbook", "deploy_service"},
				MaxConcurrency: 2, HeartbeatIntervalMS: 5000,
			})),
		valid("several versions", reg(set("payload.supported_versions", []any{"1.0", "2.0"}))),
		validThen("labels", reg(set("payload.labels", map[string]any{"site": "attic", "gpu": "true", "rack.u-2_b": ""})),
			func(t *testing.T, e *envelope.Envelope) {
				got := e.Payload.(*envelope.Register).Labels
				if len(got) != 3 || got["site"] != "attic" || got["gpu"] != "true" || got["rack.u-2_b"] != "" {
					t.Errorf("labels = %#v", got)
				}
			}),
		validThen("empty labels read as absent", reg(set("payload.labels", map[string]any{})),
			func(t *testing.T, e *envelope.Envelope) {
				if l := e.Payload.(*envelope.Register).Labels; l != nil {
					t.Errorf("labels = %#v, want nil", l)
				}
			}),
		valid("agent_id with upper case and underscore", reg(set("payload.agent_id", "Infra_01"))),
		valid("agent_id of 64 characters", reg(set("payload.agent_id", strings.Repeat("a", 64)))),
		validThen("empty capabilities read as absent", reg(set("payload.capabilities", []any{})),
			func(t *testing.T, e *envelope.Envelope) {
				if c := e.Payload.(*envelope.Register).Capabilities; c != nil {
					t.Errorf("capabilities = %#v, want nil", c)
				}
			}),

		invalid("agent_id empty", "payload.agent_id", reg(set("payload.agent_id", ""))),
		invalid("agent_id with a dot (subject token)", "payload.agent_id", reg(set("payload.agent_id", "infra.01"))),
		invalid("agent_id with a wildcard", "payload.agent_id", reg(set("payload.agent_id", "infra*"))),
		invalid("agent_id of 65 characters", "payload.agent_id", reg(set("payload.agent_id", strings.Repeat("a", 65)))),
		invalid("no supported version", "payload.supported_versions", reg(set("payload.supported_versions", []any{}))),
		invalid("malformed version", "payload.supported_versions[1]", reg(set("payload.supported_versions", []any{"1.0", "v2"}))),
		invalid("versions not an array", "payload.supported_versions", reg(set("payload.supported_versions", "1.0"))),
		invalid("work type upper case", "payload.work_types[0]", reg(set("payload.work_types", []any{"Run"}))),
		invalid("work type number", "payload.work_types[0]", reg(set("payload.work_types", []any{1}))),
		invalid("capability number", "payload.capabilities[0]", reg(set("payload.capabilities", []any{1}))),
		invalid("max_concurrency 0", "payload.max_concurrency", reg(set("payload.max_concurrency", 0))),
		invalid("heartbeat_interval_ms 0", "payload.heartbeat_interval_ms", reg(set("payload.heartbeat_interval_ms", 0))),
		invalid("resources negative", "payload.resources.cpu_cores", reg(set("payload.resources.cpu_cores", -1))),
		invalid("resources unknown key", "payload.resources.gpu_count", reg(set("payload.resources.gpu_count", 1))),
		invalid("resources null", "payload.resources", reg(set("payload.resources", nil))),
		invalid("unknown payload key", "payload.type", reg(set("payload.type", "infra"))),
		invalid("labels not an object", "payload.labels", reg(set("payload.labels", []any{"site"}))),
		invalid("label value a number", "payload.labels.gpu", reg(set("payload.labels", map[string]any{"gpu": 1}))),
		invalid("label key upper case", "payload.labels.Site", reg(set("payload.labels", map[string]any{"Site": "attic"}))),
		invalid("label key starting with a dot", "payload.labels..x", reg(set("payload.labels", map[string]any{".x": "y"}))),
		invalid("label value with a new line", "payload.labels.site", reg(set("payload.labels", map[string]any{"site": "a\nb"}))),
		invalid("label value of 64 characters", "payload.labels.site", reg(set("payload.labels", map[string]any{"site": strings.Repeat("v", 64)}))),
		invalid("33 labels", "payload.labels", reg(set("payload.labels", manyLabels(33)))),
	}
	cases = append(cases, requiredFields(typ, "agent_id", "supported_versions", "work_types",
		"max_concurrency", "heartbeat_interval_ms")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeRegisterAckRules(t *testing.T) {
	typ := envelope.TypeRegisterAck
	ack := func(edits ...edit) []byte { return envJSON(typ, edits...) }
	cases := []decodeCase{
		validThen("every field", ack(), payloadIs(&envelope.RegisterAck{AgentID: "infra-01", OrchestratorID: "orch-a", ProtocolVersion: "1.0"})),
		valid("a version this side does not speak", ack(set("payload.protocol_version", "2.0"))),
		invalid("protocol_version malformed", "payload.protocol_version", ack(set("payload.protocol_version", "1"))),
		invalid("orchestrator_id empty", "payload.orchestrator_id", ack(set("payload.orchestrator_id", ""))),
		invalid("agent_id invalid", "payload.agent_id", ack(set("payload.agent_id", "a b"))),
		invalid("unknown payload key", "payload.token", ack(set("payload.token", "x"))),
	}
	cases = append(cases, requiredFields(typ, "agent_id", "orchestrator_id", "protocol_version")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeHeartbeatRules(t *testing.T) {
	typ := envelope.TypeHeartbeat
	hb := func(edits ...edit) []byte { return envJSON(typ, edits...) }
	cases := []decodeCase{
		validThen("every field", hb(), payloadIs(&envelope.Heartbeat{
			AgentID: "infra-01", Status: "busy", ActiveTasks: 1, MaxConcurrency: 2,
			ActiveTaskIDs: []string{taskID}, Resources: machine,
		})),
		valid("idle", hb(set("payload.status", "idle"), set("payload.active_tasks", 0), del("payload.active_task_ids"))),
		invalid("gpus inside resources (x_custom_fields.gpus carries them)", "payload.resources.gpus",
			hb(set("payload.resources.gpus", []any{}))),
		valid("draining", hb(set("payload.status", "draining"))),
		validThen("task ids lower-cased", hb(set("payload.active_task_ids", []any{strings.ToUpper(taskID)})),
			func(t *testing.T, e *envelope.Envelope) {
				if ids := e.Payload.(*envelope.Heartbeat).ActiveTaskIDs; !reflect.DeepEqual(ids, []string{taskID}) {
					t.Errorf("active_task_ids = %v", ids)
				}
			}),
		validThen("empty task ids read as absent", hb(set("payload.active_task_ids", []any{})),
			func(t *testing.T, e *envelope.Envelope) {
				if ids := e.Payload.(*envelope.Heartbeat).ActiveTaskIDs; ids != nil {
					t.Errorf("active_task_ids = %#v, want nil", ids)
				}
			}),

		invalid("status offline", "payload.status", hb(set("payload.status", "offline"))),
		invalid("status running (a task status)", "payload.status", hb(set("payload.status", "running"))),
		invalid("active_tasks -1", "payload.active_tasks", hb(set("payload.active_tasks", -1))),
		invalid("max_concurrency 0", "payload.max_concurrency", hb(set("payload.max_concurrency", 0))),
		invalid("task id not a UUID", "payload.active_task_ids[1]", hb(set("payload.active_task_ids", []any{taskID, "t2"}))),
		invalid("task ids not an array", "payload.active_task_ids", hb(set("payload.active_task_ids", taskID))),
		invalid("resources fraction", "payload.resources.memory_mb", hb(set("payload.resources.memory_mb", 1.5))),
		invalid("unknown payload key", "payload.progress_percent", hb(set("payload.progress_percent", 50))),
	}
	cases = append(cases, requiredFields(typ, "agent_id", "status", "active_tasks", "max_concurrency")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeDiscoverRules(t *testing.T) {
	typ := envelope.TypeDiscover
	cases := []decodeCase{
		validThen("every field", envJSON(typ, set("to_agent", "code")), payloadIs(&envelope.Discover{OrchestratorID: "orch-a"})),
		invalid("orchestrator_id empty", "payload.orchestrator_id", envJSON(typ, set("payload.orchestrator_id", ""))),
		invalid("orchestrator_id number", "payload.orchestrator_id", envJSON(typ, set("payload.orchestrator_id", 1))),
		invalid("unknown payload key", "payload.agent_type", envJSON(typ, set("payload.agent_type", "code"))),
	}
	cases = append(cases, requiredFields(typ, "orchestrator_id")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeCancelRules(t *testing.T) {
	typ := envelope.TypeCancel
	cases := []decodeCase{
		validThen("every field", envJSON(typ), payloadIs(&envelope.Cancel{TaskID: taskID, Reason: "operator asked"})),
		validThen("no reason", envJSON(typ, del("payload.reason")), payloadIs(&envelope.Cancel{TaskID: taskID})),
		invalid("task_id not a UUID", "payload.task_id", envJSON(typ, set("payload.task_id", "7"))),
		invalid("reason number", "payload.reason", envJSON(typ, set("payload.reason", 7))),
		invalid("reason null", "payload.reason", envJSON(typ, set("payload.reason", nil))),
		invalid("unknown payload key", "payload.force", envJSON(typ, set("payload.force", true))),
	}
	cases = append(cases, requiredFields(typ, "task_id")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodePingRules(t *testing.T) {
	typ := envelope.TypePing
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		validThen("empty payload", envJSON(typ), payloadIs(&envelope.Ping{})),
		invalid("any payload key", "payload.nonce", envJSON(typ, set("payload.nonce", 1))),
		invalid("payload null", "payload", envJSON(typ, set("payload", nil))),
		invalid("payload array", "payload", envJSON(typ, set("payload", []any{}))),
	})
}

func TestDecodeDrainRules(t *testing.T) {
	typ := envelope.TypeDrain
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		validThen("timeout", envJSON(typ), payloadIs(&envelope.Drain{TimeoutSeconds: 30})),
		validThen("agent's own timeout", envJSON(typ, del("payload.timeout_seconds")), payloadIs(&envelope.Drain{})),
		invalid("timeout 0", "payload.timeout_seconds", envJSON(typ, set("payload.timeout_seconds", 0))),
		invalid("timeout negative", "payload.timeout_seconds", envJSON(typ, set("payload.timeout_seconds", -5))),
		invalid("timeout string", "payload.timeout_seconds", envJSON(typ, set("payload.timeout_seconds", "30s"))),
		invalid("timeout null", "payload.timeout_seconds", envJSON(typ, set("payload.timeout_seconds", nil))),
		invalid("unknown payload key", "payload.force", envJSON(typ, set("payload.force", true))),
	})
}

func TestDecodeControlAckRules(t *testing.T) {
	typ := envelope.TypeControlAck
	ack := func(edits ...edit) []byte { return envJSON(typ, edits...) }
	cases := []decodeCase{
		validThen("every field", ack(), payloadIs(&envelope.ControlAck{
			Command: envelope.TypeDrain, OK: true, Message: "draining", AgentStatus: "draining", ActiveTasks: 1,
		})),
		validThen("required fields only", ack(set("payload.command", "ping"), del("payload.message"), del("payload.agent_status")),
			payloadIs(&envelope.ControlAck{Command: envelope.TypePing, OK: true, ActiveTasks: 1})),
		valid("cancel refused", ack(set("payload.command", "cancel"), set("payload.ok", false), set("payload.message", "no such task"))),
		valid("status idle", ack(set("payload.agent_status", "idle"), set("payload.active_tasks", 0))),

		invalid("command register", "payload.command", ack(set("payload.command", "register"))),
		invalid("command upper case", "payload.command", ack(set("payload.command", "PING"))),
		invalid("ok string", "payload.ok", ack(set("payload.ok", "true"))),
		invalid("ok number", "payload.ok", ack(set("payload.ok", 1))),
		invalid("agent_status unknown", "payload.agent_status", ack(set("payload.agent_status", "gone"))),
		invalid("agent_status empty", "payload.agent_status", ack(set("payload.agent_status", ""))),
		invalid("active_tasks -1", "payload.active_tasks", ack(set("payload.active_tasks", -1))),
		invalid("message number", "payload.message", ack(set("payload.message", 1))),
		invalid("unknown payload key", "payload.task_id", ack(set("payload.task_id", taskID))),
	}
	cases = append(cases, requiredFields(typ, "command", "ok", "active_tasks")...)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

// manyLabels makes n labels, l0=v .. l<n-1>=v.
func manyLabels(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "v"
	}
	return m
}
