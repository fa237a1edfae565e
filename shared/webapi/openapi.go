package webapi

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the API, kept by hand;
// TestOpenAPIMatchesRoutes holds it to the routes the handler serves.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the web API (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
}
