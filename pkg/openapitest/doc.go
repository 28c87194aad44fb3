// Package openapitest keeps a service's OpenAPI document honest: its routes
// are the router's routes, and each operation documents the statuses the
// service can answer. Each service's test says which statuses those are;
// this package reads the document and walks the router. Only _test.go files
// import it.
package openapitest
