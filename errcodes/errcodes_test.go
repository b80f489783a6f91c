package errcodes_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/errcodes"
)

func TestCodeTable(t *testing.T) {
	tests := []struct {
		code      errcodes.Code
		value     int
		name      string
		retryable bool
		known     bool
	}{
		{errcodes.Timeout, 5001, "Timeout", true, true},
		{errcodes.AgentUnavailable, 5002, "Agent Unavailable", true, true},
		{errcodes.InvalidMessage, 5003, "Invalid Message", false, true},
		{errcodes.AuthenticationFailed, 5004, "Authentication Failed", false, true},
		{errcodes.ResourceLimitExceeded, 5005, "Resource Limit Exceeded", true, true},
		{errcodes.UnsupportedWorkType, 5006, "Unsupported Work Type", false, true},
		{5000, 5000, "Error 5000", false, false},
		{5007, 5007, "Error 5007", false, false},
		{5999, 5999, "Error 5999", false, false},
		{1000, 1000, "Error 1000", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if int(tt.code) != tt.value {
				t.Errorf("value = %d, want %d", tt.code, tt.value)
			}
			if got := tt.code.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
			if got := tt.code.Retryable(); got != tt.retryable {
				t.Errorf("Retryable() = %v, want %v", got, tt.retryable)
			}
			if got := tt.code.Known(); got != tt.known {
				t.Errorf("Known() = %v, want %v", got, tt.known)
			}
			want := fmt.Sprintf("%d %s", tt.value, tt.name)
			if tt.code.String() != want || tt.code.Error() != want {
				t.Errorf("String() = %q, Error() = %q, want %q", tt.code.String(), tt.code.Error(), want)
			}
			e := errcodes.New(tt.code, "x")
			if e.Retryable() != tt.retryable {
				t.Errorf("(*Error).Retryable() = %v, want %v", e.Retryable(), tt.retryable)
			}
		})
	}
	if errcodes.MinCode != 5001 || errcodes.MaxCode != 5999 {
		t.Errorf("range = %d..%d, want 5001..5999", errcodes.MinCode, errcodes.MaxCode)
	}
}

func TestErrorsIsMatchesTheCode(t *testing.T) {
	err := fmt.Errorf("dispatch: %w", errcodes.New(errcodes.Timeout, "no answer in %s", "30s"))
	tests := []struct {
		name   string
		target error
		want   bool
	}{
		{"same Code", errcodes.Timeout, true},
		{"other Code", errcodes.AgentUnavailable, false},
		{"*Error with the same code", &errcodes.Error{Code: errcodes.Timeout, Message: "other text"}, true},
		{"*Error with another code", &errcodes.Error{Code: errcodes.InvalidMessage}, false},
		{"nil *Error", (*errcodes.Error)(nil), false},
		{"unrelated error", io.EOF, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(err, tt.target); got != tt.want {
				t.Errorf("errors.Is = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestErrorsAsFindsTheError(t *testing.T) {
	inner := errcodes.NewInvalidMessage("payload.step.output_chunk", "range holds %d bytes", 10)
	err := fmt.Errorf("agent: %w", fmt.Errorf("decode: %w", inner))
	var e *errcodes.Error
	if !errors.As(err, &e) {
		t.Fatal("errors.As did not find the *errcodes.Error")
	}
	if e != inner || e.Code != errcodes.InvalidMessage || e.Field() != "payload.step.output_chunk" {
		t.Errorf("found %+v", e)
	}
	if errors.As(io.EOF, &e) {
		t.Error("errors.As matched an unrelated error")
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  *errcodes.Error
		want string
	}{
		{errcodes.New(errcodes.Timeout, "no answer after %d s", 30), "5001 Timeout: no answer after 30 s"},
		{errcodes.NewInvalidMessage("payload.exit_code", "must be 0"), "5003 Invalid Message: payload.exit_code: must be 0"},
		{errcodes.NewInvalidMessage("", "message is not valid JSON"), "5003 Invalid Message: message is not valid JSON"},
		{errcodes.New(5100, "custom"), "5100 Error 5100: custom"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestConstructorsFillTheContextFields(t *testing.T) {
	at := time.Date(2026, 1, 19, 6, 21, 4, 500_000_000, time.FixedZone("CEST", 2*3600))
	tests := []struct {
		name    string
		err     *errcodes.Error
		code    errcodes.Code
		context map[string]any
	}{
		{"timeout", errcodes.NewTimeout("no reply", 3, at), errcodes.Timeout,
			map[string]any{"attempted_retries": 3, "last_attempt": "2026-01-19T04:21:04.5Z"}},
		{"agent unavailable, heard from", errcodes.NewAgentUnavailable("gone", "infra-01", &at), errcodes.AgentUnavailable,
			map[string]any{"agent_id": "infra-01", "last_heartbeat": "2026-01-19T04:21:04.5Z"}},
		{"agent unavailable, never heard from", errcodes.NewAgentUnavailable("gone", "infra-02", nil), errcodes.AgentUnavailable,
			map[string]any{"agent_id": "infra-02", "last_heartbeat": nil}},
		{"invalid message", errcodes.NewInvalidMessage("payload.status", "bad %s", "status"), errcodes.InvalidMessage,
			map[string]any{"validation_error": "bad status", "field_name": "payload.status"}},
		{"invalid message, no field", errcodes.NewInvalidMessage("", "not JSON"), errcodes.InvalidMessage,
			map[string]any{"validation_error": "not JSON", "field_name": nil}},
		{"authentication failed", errcodes.NewAuthenticationFailed("infra-01", errcodes.TokenInvalid), errcodes.AuthenticationFailed,
			map[string]any{"agent_id": "infra-01", "token_status": "invalid"}},
		{"resource limit", errcodes.NewResourceLimitExceeded("gpu_vram_mb", 128, 512), errcodes.ResourceLimitExceeded,
			map[string]any{"limit_name": "gpu_vram_mb", "available": int64(128), "required": int64(512)}},
		{"unsupported work type", errcodes.NewUnsupportedWorkType("build", []string{"run_playbook"}), errcodes.UnsupportedWorkType,
			map[string]any{"work_type_requested": "build", "supported_types": []string{"run_playbook"}}},
		{"unsupported work type, none offered", errcodes.NewUnsupportedWorkType("build", nil), errcodes.UnsupportedWorkType,
			map[string]any{"work_type_requested": "build", "supported_types": []string{}}},
		{"unsupported version", errcodes.NewUnsupportedVersion("2.0", []string{"1.0"}), errcodes.UnsupportedWorkType,
			map[string]any{"field_name": "protocol_version", "protocol_version_requested": "2.0", "supported_types": []string{"1.0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Code != tt.code {
				t.Errorf("code = %d, want %d", tt.err.Code, tt.code)
			}
			if tt.err.Message == "" {
				t.Error("empty message: error_message must not be empty on the wire")
			}
			if !reflect.DeepEqual(tt.err.Context, tt.context) {
				t.Errorf("context = %#v\nwant      %#v", tt.err.Context, tt.context)
			}
			// Every context must survive JSON, where it travels as error_context.
			if _, err := json.Marshal(tt.err.Context); err != nil {
				t.Errorf("context does not encode: %v", err)
			}
		})
	}
}

func TestFieldAndWith(t *testing.T) {
	e := errcodes.New(errcodes.InvalidMessage, "bad")
	if e.Field() != "" || e.Context != nil {
		t.Errorf("New: field %q, context %v", e.Field(), e.Context)
	}
	if got := e.With(errcodes.KeyFieldName, "payload.hints"); got != e {
		t.Error("With returned another error")
	}
	if e.Field() != "payload.hints" {
		t.Errorf("Field() = %q after With", e.Field())
	}
	e.With(errcodes.KeyFieldName, 7)
	if e.Field() != "" {
		t.Errorf("Field() = %q for a non-string field_name", e.Field())
	}
}
