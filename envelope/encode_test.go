package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

func TestEncodeWritesUTCWithZ(t *testing.T) {
	e := envelope.New(envelope.Orchestrator, envelope.Code, "", "", &envelope.Ping{})
	e.Timestamp = time.Date(2026, 1, 19, 6, 21, 4, 120_000_000, time.FixedZone("CEST", 2*3600))
	b, err := envelope.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"timestamp":"2026-01-19T04:21:04.12Z"`)) {
		t.Errorf("encoded %s", b)
	}
	if e.Timestamp.Location().String() != "CEST" {
		t.Error("Encode changed the caller's envelope")
	}
}

func TestEncodeKeepsTextAsWritten(t *testing.T) {
	out := "<html> & \"quotes\" é 😀\n"
	e := envelope.New(envelope.Infra, envelope.Orchestrator, "", "", &envelope.WorkResult{
		TaskID: envelope.NewID(), Status: envelope.ResultSuccess, Output: out})
	b, err := envelope.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"output":"<html> & \"quotes\" é 😀\n"`)) || bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("encoded %s", b)
	}
}

func TestEncodeRefusesAnInconsistentEnvelope(t *testing.T) {
	ok := envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.Ping{})
	noPayload := *ok
	noPayload.Payload = nil
	wrongType := *ok
	wrongType.Type = envelope.TypeDrain
	for name, e := range map[string]*envelope.Envelope{"no payload": &noPayload, "type differs from payload": &wrongType} {
		if b, err := envelope.Encode(e); err == nil {
			t.Errorf("%s: encoded %s", name, b)
		}
	}
}

func TestNewFillsTheEnvelope(t *testing.T) {
	before := time.Now().UTC().Add(-time.Second)
	e := envelope.New(envelope.Orchestrator, envelope.Research, "", "", &envelope.Discover{OrchestratorID: "orch-a"})
	if e.ProtocolVersion != envelope.ProtocolVersion || e.Type != envelope.TypeDiscover ||
		e.FromAgent != envelope.Orchestrator || e.ToAgent != envelope.Research {
		t.Errorf("envelope %+v", e)
	}
	ids := map[string]bool{e.MessageID: true, e.TraceID: true, e.RequestID: true}
	if len(ids) != 3 {
		t.Errorf("ids not fresh: %s %s %s", e.MessageID, e.TraceID, e.RequestID)
	}
	if e.Timestamp.Before(before) || e.Timestamp.Location() != time.UTC {
		t.Errorf("timestamp %v", e.Timestamp)
	}
	if _, err := roundTrip(e); err != nil {
		t.Error(err)
	}
	kept := envelope.New(envelope.Orchestrator, envelope.Infra, reqID, traceID, &envelope.Ping{})
	if kept.RequestID != reqID || kept.TraceID != traceID {
		t.Errorf("New replaced the given ids: %+v", kept)
	}
}

func TestReplyAnswersTheSender(t *testing.T) {
	req := envelope.New(envelope.Orchestrator, envelope.Desktop, reqID, traceID, &envelope.Ping{})
	req.ProtocolVersion = "1.1"
	ack := req.Reply(&envelope.ControlAck{Command: envelope.TypePing, OK: true})
	if ack.FromAgent != envelope.Desktop || ack.ToAgent != envelope.Orchestrator ||
		ack.RequestID != reqID || ack.TraceID != traceID || ack.ProtocolVersion != "1.1" ||
		ack.MessageID == req.MessageID || ack.Type != envelope.TypeControlAck {
		t.Errorf("reply %+v to %+v", ack, req)
	}
}

func TestErrorPayloadCarriesTheProtocolError(t *testing.T) {
	// An agent rejects a message; the orchestrator reads the code and field back.
	_, err := envelope.Decode(envJSON(envelope.TypeWorkResult, set("payload.exit_code", 3)))
	var pe *errcodes.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Decode: %v", err)
	}
	reply := envelope.New(envelope.Infra, envelope.Orchestrator, "", "", envelope.NewErrorPayload(pe))
	got, err := roundTrip(reply)
	if err != nil {
		t.Fatal(err)
	}
	back := got.Payload.(*envelope.ErrorPayload).Err()
	if back.Code != errcodes.InvalidMessage || back.Field() != "payload.exit_code" || back.Message != pe.Message || back.Retryable() {
		t.Errorf("error after the wire: %v (field %q)", back, back.Field())
	}

	limit := errcodes.NewResourceLimitExceeded("gpu_vram_mb", 128, 512)
	got, err = roundTrip(envelope.New(envelope.Infra, envelope.Orchestrator, "", "", envelope.NewErrorPayload(limit)))
	if err != nil {
		t.Fatal(err)
	}
	back = got.Payload.(*envelope.ErrorPayload).Err()
	if !errors.Is(back, errcodes.ResourceLimitExceeded) || !back.Retryable() ||
		back.Context[errcodes.KeyAvailable] != json.Number("128") || back.Context[errcodes.KeyLimitName] != "gpu_vram_mb" {
		t.Errorf("error after the wire: %v %v", back, back.Context)
	}
	if limit.Context[errcodes.KeyAvailable] != int64(128) {
		t.Error("NewErrorPayload shares its context with the error")
	}
}

func TestCheckWorkTypeAndAgentID(t *testing.T) {
	for s, ok := range map[string]bool{"run": true, "a1_b": true, "": false, "Run": false, "1a": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false} {
		if got := envelope.CheckWorkType(s) == ""; got != ok {
			t.Errorf("CheckWorkType(%q) valid = %v, want %v", s, got, ok)
		}
	}
	for s, ok := range map[string]bool{"infra-01": true, "A_b-9": true, "": false, "a.b": false, "a*": false,
		"a>": false, "a b": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false} {
		if got := envelope.CheckAgentID(s) == ""; got != ok {
			t.Errorf("CheckAgentID(%q) valid = %v, want %v", s, got, ok)
		}
	}
}

// roundTrip encodes e and decodes the result.
func roundTrip(e *envelope.Envelope) (*envelope.Envelope, error) {
	b, err := envelope.Encode(e)
	if err != nil {
		return nil, err
	}
	return envelope.Decode(b)
}
