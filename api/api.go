// Package api holds the OpenAPI 3.1 description of voucherd's HTTP API,
// embedded so the server can serve it at /openapi.yaml and tests can check
// real responses against it.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
