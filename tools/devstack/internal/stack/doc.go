// Package stack starts the whole Aegis suite as processes on one machine: the
// Kafka stand-in (kfake), the PSP stand-in and the four services, wired to
// Postgres and Redis on localhost, with one interleaved log stream. It is
// what `make dev` runs (cmd/aegis-dev, fixed ports) and what the end-to-end
// tests run (random ports, a throwaway database), so the newcomer's stack
// and the tested stack are the same code.
//
// Each service connects as its own Postgres role (migrations.ServiceRoles),
// as in production: Start makes the roles logins without a password (trust
// auth on localhost) and swaps the user of Config.DatabaseURL, the schema
// owner's, for each service's role, so that a statement a service's grants
// do not allow fails in make dev, e2e and chaos, not first in production.
//
// Stop shuts down in reverse dependency order: the services first (each
// finishes its in-flight work on SIGTERM), then the PSP and Kafka stand-ins.
package stack
