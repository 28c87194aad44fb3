// Command dlq-admin stores every dead letter published to the <topic>.dlq
// topics in Postgres and serves them to operators over /v1
// (docs/design/contract.md, "dlq-admin").
package main

import "github.com/aegis-payments/aegis/pkg/service"

func main() { service.Main("dlq-admin", run) }
