package envelope_test

import (
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// An orchestrator builds a work_request, encodes it for the wire, and the agent decodes
// it, which checks every rule of the protocol.
func Example() {
	req := envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.WorkRequest{
		TaskID:     envelope.NewID(),
		WorkType:   "run_playbook",
		Parameters: map[string]any{"playbook": "deploy_kuma.yml"},
		Hints:      &envelope.Hints{MaxDurationSeconds: 300},
	})
	data, err := envelope.Encode(req)
	if err != nil {
		fmt.Println(err)
		return
	}

	got, err := envelope.Decode(data)
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	work := got.Payload.(*envelope.WorkRequest)
	fmt.Println(got.Type, work.WorkType, work.Hints.MaxDurationSeconds)
	fmt.Println(got.RequestID == req.RequestID, "valid")
	// Output:
	// work_request run_playbook 300
	// true valid
}

// A rejected envelope comes back as an *errcodes.Error naming the offending field.
func ExampleDecode_rejected() {
	data := []byte(`{"protocol_version":"1.0","message_id":"550e8400-e29b-41d4-a716-446655440001",
		"from_agent":"infra","to_agent":"orchestrator","timestamp":"2026-01-19T04:21:04Z",
		"trace_id":"550e8400-e29b-41d4-a716-446655440002","request_id":"550e8400-e29b-41d4-a716-446655440003",
		"type":"work_result","payload":{"task_id":"550e8400-e29b-41d4-a716-446655440004",
		"status":"success","exit_code":1}}`)
	_, err := envelope.Decode(data)
	var e *errcodes.Error
	if errors.As(err, &e) {
		fmt.Println(int(e.Code), e.Field(), e.Retryable())
	}
	// Output:
	// 5003 payload.exit_code false
}
