// Package deploy checks the containers path without a Docker engine: that
// docker-compose.yml is valid, and that every image's build — one module
// with only pkg/ and migrations/ beside it, GOWORK=off, exactly what the
// Dockerfile copies — compiles.
package deploy
