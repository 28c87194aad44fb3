// Package kafkatest starts an in-process kfake cluster for tests. kfake speaks
// the real Kafka wire protocol, so the code under test uses its production
// franz-go client unchanged; faults are injected through kfake's control
// hooks, never by faking the client. Import it only from _test.go files.
package kafkatest
