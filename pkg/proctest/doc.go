// Package proctest builds and runs the project's real binaries from tests:
// the services, kfake and the PSP stand-in run as processes, exactly as in
// production and in `make dev`, so end-to-end tests exercise main, config,
// signals and shutdown too. Such tests are heavy (Heavy): -short, `make
// test-fast`, skips them. Import it only from _test.go files.
package proctest
