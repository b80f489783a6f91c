package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
)

// TestWriteErrorWritesTheErrorBodyAsJSON: the status, the content type, and the
// body byte for byte, HTML left unescaped and an empty field left out.
func TestWriteErrorWritesTheErrorBodyAsJSON(t *testing.T) {
	cases := []struct {
		field, want string
	}{
		{"", `{"error":{"code":"bad_request","message":"a <b> & 'c'"}}` + "\n"},
		{"to_agent", `{"error":{"code":"bad_request","field":"to_agent","message":"a <b> & 'c'"}}` + "\n"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		api.WriteError(rec, http.StatusBadRequest, "bad_request", tc.field, "a <b> & 'c'")
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != tc.want {
			t.Errorf("field %q: HTTP %d, %q, %q; want 400, application/json, %q", tc.field, rec.Code,
				rec.Header().Get("Content-Type"), rec.Body.String(), tc.want)
		}
	}
}
