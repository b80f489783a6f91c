package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chiffon webhooks deliveries lists what the API records, one row a delivery.
func TestWebhooksDeliveriesLists(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/webhooks/deliveries" || r.Header.Get("Authorization") != "Bearer tok" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`[{"id":"d1","event":"task.failed","receiver":"https://hooks.lan/x","created_at":"2026-11-24T00:00:00Z",` +
			`"state":"pending","attempts":4,"last_status":500,"last_error":"the receiver answered 500 Internal Server Error"}]`))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "webhooks", "deliveries", "--server", srv.URL, "--api-token-file", tokenFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"d1", "task.failed", "pending", "the receiver answered 500", "https://hooks.lan/x"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
