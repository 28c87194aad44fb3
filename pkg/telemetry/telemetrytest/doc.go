// Package telemetrytest is an in-process OTLP/HTTP trace receiver for
// tests: services export to it with OTEL_EXPORTER_OTLP_ENDPOINT set to its
// URL and OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, and the test asserts on
// the spans it received (which services, which trace, which parent). It
// exists so tests can check traces end to end without running a collector.
package telemetrytest
