package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of the HTTP API, written by hand.
// Package orchestrator's openapi_test.go checks it against the official OpenAPI
// 3.1 schema and against the routes API.routes registers, and its API tests
// check every answer they get against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI answers GET /api/v1/openapi.json with the document.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
