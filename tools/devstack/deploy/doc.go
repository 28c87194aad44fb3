// Package deploy checks the containers path without a Docker engine: that
// docker-compose.yml is valid, and that every image's build — one module
// with only pkg/ and migrations/ beside it, GOWORK=off, exactly what the
// Dockerfile copies — compiles. It also checks the production overlay's
// Kafka principals: each service its own user, with ACLs for exactly the
// topics and groups the code uses (TestKafkaACLs), and renders deploy/k8s
// (base and production, with the kustomize pinned in deploy/go.mod) to
// check what the manifests promise: network policies that select the pods,
// deny by default in both directions and let DNS out, scale left to the
// autoscalers, requests and limits on every container, a preStop sleep and
// a termination grace that covers SHUTDOWN_GRACE, and a migrate Job named
// after the release (TestManifests, TestMigrateJobFollowsTheRelease).
// make deploy-check runs these.
package deploy
