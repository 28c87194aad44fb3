// Package deploy checks the containers path without a Docker engine: that
// docker-compose.yml is valid, and that every image's build — one module
// with only pkg/ and migrations/ beside it, GOWORK=off, exactly what the
// Dockerfile copies — compiles. It also checks the production overlay's
// Kafka principals: each service its own user, with ACLs for exactly the
// topics and groups the code uses (TestKafkaACLs, run by make deploy-check).
package deploy
