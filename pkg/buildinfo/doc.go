// Package buildinfo says which build of Aegis is running: the release
// version and commit stamped into every binary, and the Go toolchain that
// built it. Every binary prints it for `--version`, and every service
// exports it as aegis_build_info{version,commit,go} 1, so a dashboard or an
// alert can say which release a pod runs and a rollout can be followed.
//
// The version and commit are given at link time (make build and make
// release, the Dockerfile):
//
//	-ldflags "-X github.com/aegis-payments/aegis/pkg/buildinfo.version=v1.2.0
//	          -X github.com/aegis-payments/aegis/pkg/buildinfo.commit=<sha>"
//
// They are the only package-level variables the suite has, set by the
// linker and never written at run time. A binary built without them (go
// run, go test) reports version "dev" and the commit Go stamped from the
// checkout's VCS data, when it has any ("unknown" otherwise).
package buildinfo
