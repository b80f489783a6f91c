package api

import (
	"encoding/json"
	"net/http"
)

// WriteError answers w with status and an ErrorBody holding code, field (left
// out when "") and message, as application/json with HTML escaping off: the one
// way every API error is written.
func WriteError(w http.ResponseWriter, status int, code, field, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(ErrorBody{Error: APIErrorDetail{Code: code, Field: field, Message: message}})
}
