package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// MaxOutputSize bounds an unchunked step output and a work_result's output: 1 MiB.
const MaxOutputSize = 1 << 20

// payloadSchemas reads and checks the payload of each message type.
var payloadSchemas map[Type]func(*object) (Payload, *errcodes.Error)

func init() {
	payloadSchemas = map[Type]func(*object) (Payload, *errcodes.Error){
		TypeWorkRequest: readWorkRequest,
		TypeWorkStatus:  readWorkStatus,
		TypeWorkResult:  readWorkResult,
		TypeError:       readError,
		TypeRegister:    readRegister,
		TypeRegisterAck: readRegisterAck,
		TypeHeartbeat:   readHeartbeat,
		TypeDiscover:    readDiscover,
		TypeCancel:      readCancel,
		TypePing:        readPing,
		TypeDrain:       readDrain,
		TypeControlAck:  readControlAck,
	}
}

func readWorkRequest(o *object) (Payload, *errcodes.Error) {
	p := &WorkRequest{TaskID: o.uuid("task_id"), WorkType: o.workType("work_type")}
	p.Parameters = o.anyMap("parameters", false)
	if p.Parameters == nil {
		p.Parameters = map[string]any{}
	}
	p.Hints = readHints(o)
	return p, o.close("task_id", "work_type", "parameters", "hints")
}

func readHints(o *object) *Hints {
	h := o.sub("hints", false)
	if h == nil {
		return nil
	}
	out := &Hints{
		MaxDurationSeconds: h.intRange("max_duration_seconds", false, 1, 1<<40),
		MaxMemoryMB:        h.intRange("max_memory_mb", false, 1, 1<<40),
		AgentID:            h.agentID("agent_id", false),
	}
	out.Extra = h.others("max_duration_seconds", "max_memory_mb", "agent_id")
	o.err = h.err
	return out
}

func readWorkStatus(o *object) (Payload, *errcodes.Error) {
	p := &WorkStatus{
		TaskID:          o.uuid("task_id"),
		Status:          o.oneOf("status", true, StatusRunning, StatusStepCompleted, StatusPaused),
		ProgressPercent: int(o.intRange("progress_percent", true, 0, 100)),
	}
	if s := o.sub("step", true); s != nil {
		p.Step = Step{
			Number:      s.intRange("number", true, 0, 1<<53),
			Name:        s.str("name", true),
			Output:      s.str("output", true),
			OutputChunk: s.str("output_chunk", false),
		}
		s.checkOutput(&p.Step)
		o.err = s.close("number", "name", "output", "output_chunk")
	}
	return p, o.close("task_id", "status", "progress_percent", "step")
}

// checkOutput applies the chunk rules to a step: a chunk's output fills its range
// exactly, and unchunked output stays within MaxOutputSize.
func (s *object) checkOutput(st *Step) {
	if s.err != nil {
		return
	}
	if !s.has("output_chunk") {
		if len(st.Output) > MaxOutputSize {
			s.fail("output", "unchunked output is %d bytes, over %d: send it as chunks", len(st.Output), MaxOutputSize)
		}
		return
	}
	r, err := ParseChunkRange(st.OutputChunk)
	if err != nil {
		s.fail("output_chunk", "%v", err)
		return
	}
	if int64(len(st.Output)) != r.Len() {
		s.fail("output_chunk", "range %s holds %d bytes but output has %d", st.OutputChunk, r.Len(), len(st.Output))
	}
}

func readWorkResult(o *object) (Payload, *errcodes.Error) {
	p := &WorkResult{
		TaskID:   o.uuid("task_id"),
		Status:   o.resultStatus("status"),
		ExitCode: o.integer("exit_code", true),
		Output:   o.str("output", false),
	}
	if o.err == nil {
		switch {
		case p.Status == ResultSuccess && p.ExitCode != 0:
			o.fail("exit_code", "must be 0 when status is success, got %d", p.ExitCode)
		case p.Status == ResultFailed && p.ExitCode == 0:
			o.fail("exit_code", "must be non-zero when status is failed")
		case len(p.Output) > MaxOutputSize:
			o.fail("output", "output is %d bytes, over %d: send the rest as chunked work_status", len(p.Output), MaxOutputSize)
		}
	}
	if r := o.sub("resources_used", false); r != nil {
		p.ResourcesUsed = &ResourcesUsed{
			DurationSeconds: r.intRange("duration_seconds", false, 0, 1<<53),
			GPUVRAMMB:       r.intRange("gpu_vram_mb", false, 0, 1<<53),
			CPUTimeMS:       r.intRange("cpu_time_ms", false, 0, 1<<53),
		}
		o.err = r.close("duration_seconds", "gpu_vram_mb", "cpu_time_ms")
	}
	return p, o.close("task_id", "status", "exit_code", "output", "resources_used")
}

// resultStatus reads a work_result status, naming the replacement for the old Python
// project's "completed".
func (o *object) resultStatus(key string) string {
	s := o.str(key, true)
	if o.err == nil && s == "completed" {
		o.fail(key, "\"completed\" is not a status: use \"success\" (or \"failed\", \"cancelled\")")
	}
	if o.err == nil && s != ResultSuccess && s != ResultFailed && s != ResultCancelled {
		o.fail(key, "must be one of success, failed, cancelled, got %q", s)
	}
	return s
}

func readError(o *object) (Payload, *errcodes.Error) {
	p := &ErrorPayload{
		ErrorCode:    int(o.intRange("error_code", true, int64(errcodes.MinCode), int64(errcodes.MaxCode))),
		ErrorMessage: o.nonEmpty("error_message", true),
		ErrorContext: o.anyMap("error_context", false),
	}
	return p, o.close("error_code", "error_message", "error_context")
}

func readRegister(o *object) (Payload, *errcodes.Error) {
	p := &Register{
		AgentID: o.agentID("agent_id", true),
		Name:    o.str("name", false),
		SupportedVersions: o.strings("supported_versions", true, func(v string) string {
			if !validVersionSyntax(v) {
				return fmt.Sprintf("must be MAJOR.MINOR, got %q", v)
			}
			return ""
		}),
		WorkTypes:           o.strings("work_types", true, CheckWorkType),
		Capabilities:        o.strings("capabilities", false, nil),
		Labels:              readLabels(o),
		MaxConcurrency:      int(o.intRange("max_concurrency", true, 1, 1<<20)),
		HeartbeatIntervalMS: o.intRange("heartbeat_interval_ms", true, 1, 1<<31),
		Resources:           readResources(o),
	}
	if o.err == nil && len(p.SupportedVersions) == 0 {
		o.fail("supported_versions", "must name at least one version")
	}
	return p, o.close("agent_id", "name", "supported_versions", "work_types", "capabilities", "labels",
		"max_concurrency", "heartbeat_interval_ms", "resources")
}

// readLabels reads a registration's labels: an object of at most MaxLabels
// strings, each key and value as CheckLabel says. An empty object reads as none,
// as Encode writes none.
func readLabels(o *object) map[string]string {
	m := o.anyMap("labels", false)
	if len(m) == 0 || o.err != nil {
		return nil
	}
	if len(m) > MaxLabels {
		o.fail("labels", "must hold at most %d labels, got %d", MaxLabels, len(m))
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, ok := m[k].(string)
		if !ok {
			o.fail("labels."+k, "must be a string")
			return nil
		}
		if msg := CheckLabel(k, v); msg != "" {
			o.fail("labels."+k, "%s", msg)
			return nil
		}
		out[k] = v
	}
	return out
}

func readResources(o *object) *Resources {
	r := o.sub("resources", false)
	if r == nil {
		return nil
	}
	out := &Resources{
		CPUCores:   r.intRange("cpu_cores", false, 0, 1<<53),
		MemoryMB:   r.intRange("memory_mb", false, 0, 1<<53),
		DiskFreeMB: r.intRange("disk_free_mb", false, 0, 1<<53),
		GPUVRAMMB:  r.intRange("gpu_vram_mb", false, 0, 1<<53),
	}
	o.err = r.close("cpu_cores", "memory_mb", "disk_free_mb", "gpu_vram_mb")
	return out
}

func readRegisterAck(o *object) (Payload, *errcodes.Error) {
	p := &RegisterAck{
		AgentID:         o.agentID("agent_id", true),
		OrchestratorID:  o.nonEmpty("orchestrator_id", true),
		ProtocolVersion: o.str("protocol_version", true),
	}
	if o.err == nil && !validVersionSyntax(p.ProtocolVersion) {
		o.fail("protocol_version", "must be MAJOR.MINOR, got %q", p.ProtocolVersion)
	}
	return p, o.close("agent_id", "orchestrator_id", "protocol_version")
}

func readHeartbeat(o *object) (Payload, *errcodes.Error) {
	p := &Heartbeat{
		AgentID:        o.agentID("agent_id", true),
		Status:         o.oneOf("status", true, AgentIdle, AgentBusy, AgentDraining),
		ActiveTasks:    int(o.intRange("active_tasks", true, 0, 1<<20)),
		MaxConcurrency: int(o.intRange("max_concurrency", true, 1, 1<<20)),
		ActiveTaskIDs: o.lowerStrings("active_task_ids", func(s string) string {
			if !isUUID(s) {
				return fmt.Sprintf("must be a UUID, got %q", s)
			}
			return ""
		}),
		Resources: readResources(o),
	}
	return p, o.close("agent_id", "status", "active_tasks", "max_concurrency", "active_task_ids", "resources")
}

func readDiscover(o *object) (Payload, *errcodes.Error) {
	p := &Discover{OrchestratorID: o.nonEmpty("orchestrator_id", true)}
	return p, o.close("orchestrator_id")
}

func readCancel(o *object) (Payload, *errcodes.Error) {
	p := &Cancel{TaskID: o.uuid("task_id"), Reason: o.str("reason", false)}
	return p, o.close("task_id", "reason")
}

func readPing(o *object) (Payload, *errcodes.Error) {
	return &Ping{}, o.close()
}

func readDrain(o *object) (Payload, *errcodes.Error) {
	p := &Drain{TimeoutSeconds: o.intRange("timeout_seconds", false, 1, 1<<31)}
	return p, o.close("timeout_seconds")
}

func readControlAck(o *object) (Payload, *errcodes.Error) {
	p := &ControlAck{
		Command:     Type(o.oneOf("command", true, string(TypeCancel), string(TypePing), string(TypeDrain))),
		OK:          o.boolean("ok", true),
		Message:     o.str("message", false),
		AgentStatus: o.oneOf("agent_status", false, AgentIdle, AgentBusy, AgentDraining),
		ActiveTasks: int(o.intRange("active_tasks", true, 0, 1<<20)),
	}
	return p, o.close("command", "ok", "message", "agent_status", "active_tasks")
}

func (o *object) workType(key string) string {
	s := o.str(key, true)
	if o.err == nil {
		if msg := CheckWorkType(s); msg != "" {
			o.fail(key, "%s", msg)
		}
	}
	return s
}

func (o *object) agentID(key string, required bool) string {
	s, ok := o.text(key, required, nil)
	if ok {
		if msg := CheckAgentID(s); msg != "" {
			o.fail(key, "%s", msg)
		}
	}
	return s
}

func (o *object) nonEmpty(key string, required bool) string {
	s, ok := o.text(key, required, nil)
	if ok && s == "" {
		o.fail(key, "must not be empty")
	}
	return s
}

// lowerStrings reads an optional array of UUIDs, lower-cased.
func (o *object) lowerStrings(key string, check func(string) string) []string {
	ss := o.strings(key, false, check)
	for i, s := range ss {
		ss[i] = lowerASCII(s)
	}
	return ss
}

// compact strips insignificant whitespace so that a value re-encodes byte-identically.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
