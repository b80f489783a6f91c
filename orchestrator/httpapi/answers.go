package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// decodeBody decodes a request's JSON body into v strictly: no unknown field,
// one value. It answers the error itself and reports false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		writeDecodeErr(w, err)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body holds more than one JSON value")
		return false
	}
	return true
}

// decodeOptional decodes a request's optional JSON body into v, as decodeBody
// does; an empty body leaves v as it is.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeDecodeErr(w, err)
		return false
	}
	return true
}

// writeRequestErr answers an error of a request that makes something.
func writeRequestErr(w http.ResponseWriter, err error) {
	var fe *api.FieldError
	var we *api.WorkTypeError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
	case errors.As(err, &we):
		api.WriteErrorDetail(w, http.StatusUnprocessableEntity,
			api.APIErrorDetail{Code: we.Code, Field: we.Field, Pointer: we.Pointer, Message: we.Message})
	case errors.Is(err, api.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "parameters", err.Error())
	case unavailable(err):
		writeUnavailable(w, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
	}
}

// unavailable reports whether err says this orchestrator cannot act now, but
// another (or it, later) can: it closed, it does not lead, or its store is out
// of reach. Nothing was stored.
func unavailable(err error) bool {
	return errors.Is(err, api.ErrClosed) || errors.Is(err, task.ErrNotLeader) || errors.Is(err, task.ErrUnavailable)
}

// writeUnavailable answers 503 with Retry-After: nothing was done, and the
// request may be sent again (to this orchestrator or another of its group).
func writeUnavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "unavailable", "", msg)
}

// writeDecodeErr answers a body that is not a valid submission, naming the field.
func writeDecodeErr(w http.ResponseWriter, err error) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("body over %d bytes", maxBody))
	case errors.As(err, &te):
		writeError(w, http.StatusBadRequest, "invalid_field", te.Field, fmt.Sprintf("must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value))
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body is not valid JSON: "+err.Error())
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body is empty")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		writeError(w, http.StatusBadRequest, "unknown_field", field, "unknown field")
	default:
		writeError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32", "uint32", "uint64":
		return "an integer"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "an object"
	}
	return "a " + k
}

func writeTaskErr(w http.ResponseWriter, err error) {
	if errors.Is(err, task.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "id", "no such task")
		return
	}
	if unavailable(err) {
		writeUnavailable(w, err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	api.WriteError(w, status, code, field, msg)
}
