package envelope_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// The original Python project sent a few things differently. Chiffon rejects each with
// a 5003 whose message tells the sender what to change.
func TestDecodeRejectsPythonProjectForms(t *testing.T) {
	naive := func(ts string) decodeCase {
		c := invalid("naive timestamp "+ts, "timestamp", envJSON(wr, set("timestamp", ts)))
		c.msg = "no zone"
		return c
	}
	completed := invalid("status completed", "payload.status",
		envJSON(envelope.TypeWorkResult, set("payload.status", "completed")))
	completed.msg = `use "success"`
	priority := invalid("priority in the payload", "payload.priority", envJSON(wr, set("payload.priority", "high")))
	priority.msg = "no priority field"
	topPriority := invalid("priority beside the payload", "priority", envJSON(wr, set("priority", 1)))
	topPriority.msg = "no priority field"
	context := invalid("context instead of error_context", "payload.context",
		envJSON(envelope.TypeError, del("payload.error_context"), set("payload.context", map[string]any{"a": 1})))
	context.msg = "error_context"
	code := invalid("code 1000", "payload.error_code", envJSON(envelope.TypeError, set("payload.error_code", 1000)))
	code.msg = "between 5001 and 5999"

	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		naive("2026-01-19T04:21:04"),
		naive("2026-01-19T04:21:04.123456"),
		completed, priority, topPriority, context, code,
		invalid("code 9999", "payload.error_code", envJSON(envelope.TypeError, set("payload.error_code", 9999))),
		invalid("heartbeat inside work_status", "payload.status",
			envJSON(envelope.TypeWorkStatus, set("payload.status", "heartbeat"))),
	})
}
