package envelope_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

var benchTime = time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)

const logLine = "2026-01-19T04:21:04Z kuma[1]: monitor \"uptime\" ok <200>\n"

// benchEnvelopes are the two shapes that dominate traffic: a typical work_request and a
// work_status carrying one full chunk of output.
func benchEnvelopes(b *testing.B) []struct {
	name string
	env  *envelope.Envelope
	data []byte
} {
	b.Helper()
	req := &envelope.Envelope{
		ProtocolVersion: "1.0", MessageID: msgID, FromAgent: envelope.Orchestrator, ToAgent: envelope.Infra,
		Timestamp: benchTime, TraceID: traceID, RequestID: reqID, Type: envelope.TypeWorkRequest,
		Payload: &envelope.WorkRequest{
			TaskID:   taskID,
			WorkType: "run_playbook",
			Parameters: map[string]any{
				"playbook":   "deploy_kuma.yml",
				"extra_vars": map[string]any{"version": "1.4.0", "environment": "homelab", "replicas": 2, "tls": true},
				"tags":       []any{"kuma", "monitoring", "docker"},
			},
			Hints: &envelope.Hints{MaxDurationSeconds: 300, MaxMemoryMB: 512, AgentID: "infra-01"},
		},
		XCustomFields: map[string]any{"submitted_by": "operator"},
	}
	status := &envelope.Envelope{
		ProtocolVersion: "1.0", MessageID: msgID, FromAgent: envelope.Infra, ToAgent: envelope.Orchestrator,
		Timestamp: benchTime, TraceID: traceID, RequestID: reqID, Type: envelope.TypeWorkStatus,
		Payload: &envelope.WorkStatus{
			TaskID: taskID, Status: envelope.StatusRunning, ProgressPercent: 100,
			Step: envelope.Step{
				Number: 5, Name: "Collecting logs",
				Output:      strings.Repeat(logLine, envelope.MaxChunkSize/len(logLine)+1)[:envelope.MaxChunkSize],
				OutputChunk: "bytes 0-262144 of 524288",
			},
		},
	}
	out := []struct {
		name string
		env  *envelope.Envelope
		data []byte
	}{{name: "work_request", env: req}, {name: "work_status_256KiB_chunk", env: status}}
	for i := range out {
		data, err := envelope.Encode(out[i].env)
		if err != nil {
			b.Fatal(err)
		}
		out[i].data = data
	}
	return out
}

func BenchmarkDecode(b *testing.B) {
	for _, bc := range benchEnvelopes(b) {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if _, err := envelope.Decode(bc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, bc := range benchEnvelopes(b) {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if _, err := envelope.Encode(bc.env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
