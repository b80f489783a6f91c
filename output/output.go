// Package output is how a task's output crosses the bus, both ways: the
// x_custom_fields keys that place and describe it, the agent's writer that cuts it
// into work_status messages of at most 256 KiB of text ("bytes A-B of N" chunks),
// and the orchestrator's assembler that puts it back together, whatever order,
// repeats and replays the bus brings. The wire format of a chunk range is the
// envelope package's (envelope.ChunkRange), since the decoder checks it.
package output

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// Keys of x_custom_fields that carry output facts.
const (
	// KeyOffset, on a work_status, is the offset of its step.output in the task's
	// whole output.
	KeyOffset = "output_offset"
	// KeyTruncated, on a work_result, is true when its output is only the tail of
	// the whole output.
	KeyTruncated = "output_truncated"
	// KeyTotalBytes, on a truncated work_result, is the whole output's length.
	KeyTotalBytes = "output_total_bytes"
	// KeyStructured, on a work_result, is the handler's machine-readable result (a
	// script's last stdout line of JSON).
	KeyStructured = "structured_output"
)

// Offset reads KeyOffset from x.
func Offset(x map[string]any) (int64, bool) { return intField(x, KeyOffset) }

// Truncation reads a work_result's KeyTruncated and KeyTotalBytes; the total is
// the result's own output length when the field is absent.
func Truncation(x map[string]any, res *envelope.WorkResult) (truncated bool, total int64) {
	truncated, _ = x[KeyTruncated].(bool)
	total, ok := intField(x, KeyTotalBytes)
	if !ok {
		total = int64(len(res.Output))
	}
	return truncated, total
}

// Structured reads KeyStructured from x as compact JSON; nil when absent or null.
func Structured(x map[string]any) (json.RawMessage, error) {
	v, ok := x[KeyStructured]
	if !ok || v == nil {
		return nil, nil
	}
	return jsonw.AppendValue(nil, v)
}

// TailFields cuts wr's output to its rune-aligned tail of at most limit bytes when
// output is longer, and says so in fields (created when nil): KeyTruncated and
// KeyTotalBytes. It returns the fields.
func TailFields(wr *envelope.WorkResult, output string, fields map[string]any, limit int) map[string]any {
	if len(output) <= limit {
		wr.Output = output
		return fields
	}
	start := len(output) - limit
	for start < len(output) && !utf8.RuneStart(output[start]) {
		start++
	}
	wr.Output = output[start:]
	if fields == nil {
		fields = map[string]any{}
	}
	fields[KeyTruncated] = true
	fields[KeyTotalBytes] = int64(len(output))
	return fields
}

// intField reads an integer from x, as decoded (json.Number) or as set in memory.
func intField(x map[string]any, key string) (int64, bool) {
	switch v := x[key].(type) {
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	case float64:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	}
	return 0, false
}
