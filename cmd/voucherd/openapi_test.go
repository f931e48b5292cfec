package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/api"
)

var (
	openapiOnce   sync.Once
	openapiRouter routers.Router
	openapiErr    error
)

// openapiValidator loads api/openapi.yaml once for the test binary.
func openapiValidator() (routers.Router, error) {
	openapiOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPI)
		if err != nil {
			openapiErr = err
			return
		}
		if openapiErr = doc.Validate(loader.Context); openapiErr != nil {
			return
		}
		// The router matches paths whatever the server URL's host.
		doc.Servers = nil
		openapiRouter, openapiErr = legacy.NewRouter(doc)
	})
	return openapiRouter, openapiErr
}

// checkAgainstOpenAPI fails the test when a real response of the server
// does not match api/openapi.yaml: every HTTP test of the suite goes
// through it, so the description stays true.
func checkAgainstOpenAPI(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	router, err := openapiValidator()
	require.NoError(t, err, "api/openapi.yaml is invalid")
	route, params, err := router.FindRoute(req)
	require.NoError(t, err, "%s %s is not described in api/openapi.yaml", req.Method, req.URL.Path)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(body)
	err = openapi3filter.ValidateResponse(context.Background(), in)
	require.NoError(t, err, "%s %s answered %d %s, which api/openapi.yaml does not allow", req.Method, req.URL.Path, status, body)
}

func TestOpenAPIServedAndValid(t *testing.T) {
	t.Parallel()
	_, err := openapiValidator()
	require.NoError(t, err)
	s := newStack(t, stackOptions{})
	resp, err := http.Get(s.base + "/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, bytes.Equal(api.OpenAPI, got))
}
