# Aegis — see README.md. Every target runs from the repository root.

GO        ?= go
BIN       := bin
SERVICES  := webhook-api outbox-relay payout-worker dlq-admin
TOOLS     := aegis-dev aegis-kafka aegis-psp aegis-bench aegis-chaos aegis-soak
# Every module of the workspace; `go test ./...` alone would not cross them.
PACKAGES   = $(shell $(GO) list -m -f '{{.Dir}}/...')
TEST_FLAGS ?= -race -count=1 -timeout 12m

# The release and commit every binary is stamped with (pkg/buildinfo): the
# nearest tag (v1.2.0, or v1.2.0-3-gabc1234 after it, -dirty with local edits)
# and the commit's hash. `make release VERSION=v1.2.3` sets the version.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BUILDINFO := github.com/aegis-payments/aegis/pkg/buildinfo
LDFLAGS    = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT)

.PHONY: all build ldflags release dev test test-fast migrate lint fuzz tidy bench chaos soak compose-check deploy-check rules-check tidy-check generate generate-check clean

all: build

## build: bin/webhook-api bin/outbox-relay bin/payout-worker bin/dlq-admin, bin/aegisctl (static) and the dev tools,
## stamped with VERSION and COMMIT (`bin/webhook-api --version`)
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./services/,$(SERVICES)) $(addprefix ./tools/devstack/cmd/,$(TOOLS))
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./services/dlq-admin/cmd/aegisctl

# ldflags: the -ldflags build and release stamp with (tools/devstack/deploy's test builds with them)
ldflags:
	@echo '$(LDFLAGS)'

## release: make release VERSION=v1.2.3 — refuses without VERSION, with a dirty tree or without a
## CHANGELOG.md section for it; builds aegisctl for linux and darwin (amd64, arm64) into bin/release/
## and the four service images aegis/<service>:<version> (RELEASE_IMAGES=0 skips them; without a
## Docker engine they are skipped loudly), pins the production overlay to the version and prints the
## `git tag -a` to run. Nothing is pushed. docs/operations/deploy.md, "Versions and releases".
RELEASE_IMAGES ?= 1
release:
	@RELEASE_VERSION='$(if $(filter command line environment,$(origin VERSION)),$(VERSION))' \
		RELEASE_IMAGES='$(RELEASE_IMAGES)' GO='$(GO)' SERVICES='$(SERVICES)' LDFLAGS='$(LDFLAGS)' COMMIT='$(COMMIT)' \
		scripts/release.sh

## dev: the whole suite in the foreground on localhost; Ctrl-C stops it
dev: build
	@scripts/devdeps.sh
	@$(BIN)/aegis-dev

## test: every test of every module with the race detector, against real Postgres, Redis and kfake,
## and every check: lint, tidy-check, fuzz, deploy-check, rules-check. lint, deploy-check and
## rules-check run alongside the tests at low priority (nice), using the CPU the tests leave idle
## while they wait on their stacks; their output is kept in bin/checks.log and printed after the
## tests'. fuzz runs alone afterwards, with a budget of executions per target.
CHECKS_LOG := $(BIN)/checks.log
test:
	@scripts/devdeps.sh compose browser promtool
	@$(MAKE) --no-print-directory tidy-check
	@mkdir -p $(BIN)
	@echo "lint, generate-check, deploy-check and rules-check run alongside the tests; output in $(CHECKS_LOG), printed after them"
	@(nice -n 10 $(MAKE) --no-print-directory -k lint generate-check deploy-check rules-check) >$(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(GO) test $(TEST_FLAGS) $(PACKAGES); tested=$$?; \
	wait $$checks; checked=$$?; \
	echo "--- lint, generate-check, deploy-check, rules-check ($(CHECKS_LOG)) ---"; cat $(CHECKS_LOG); \
	if [ $$checked -ne 0 ]; then echo "make test: lint, generate-check, deploy-check or rules-check failed (see above)"; fi; \
	[ $$tested -eq 0 ] && [ $$checked -eq 0 ]
	@$(MAKE) --no-print-directory fuzz FUZZTIME=50000x

## test-fast: the fast tier, under two minutes: unit and store tests with -short, which skips every
## heavy test (proctest.Heavy: binaries, stacks, chaos, real session timeouts); the end-to-end package
## and the packages driving a browser are left out whole. No race detector (make test runs every test
## with it: it doubles this tier's time), four packages at once (they wait on Postgres and kfake more
## than they compute), no checks, no fuzz.
FAST_PACKAGES = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' $(PACKAGES) | \
	awk '$$1 !~ /\/e2e$$/ && !/chromedp/ { print $$1 }')
test-fast:
	@scripts/devdeps.sh
	$(GO) test -short -count=1 -p 4 -timeout 5m $(FAST_PACKAGES)

## migrate: apply the embedded migrations to DATABASE_URL
migrate: build
	$(BIN)/webhook-api migrate

## lint: gofmt and golangci-lint (.golangci.yml) in every module of go.work; golangci-lint's govet
## runs every analyzer go vet does (.golangci.yml lists them), so go vet is not run twice.
## golangci-lint is pinned in tools/lint/go.mod (outside go.work) and built from it.
GOLANGCI_LINT := $(CURDIR)/$(BIN)/golangci-lint
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@mkdir -p $(BIN)
	@cd tools/lint && GOWORK=off $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@for d in $$($(GO) list -m -f '{{.Dir}}'); do \
		echo "golangci-lint $$d"; \
		(cd $$d && $(GOLANGCI_LINT) run --allow-serial-runners --config $(CURDIR)/.golangci.yml ./...) || exit 1; \
	done

## fuzz: a longer fuzzing run of the webhook signature and parsing paths. FUZZTIME is a count of
## executions per target (Nx), not a duration: Go 1.26's fuzz coordinator can report its own
## -fuzztime deadline as a failure ("context deadline exceeded", no input written; fixed in Go 1.27),
## and a count never arms that deadline. 1000000x is about a minute and a half per target here.
FUZZTIME ?= 1000000x
fuzz:
	cd services/webhook-api && $(GO) test -run '^$$' -fuzz FuzzStripeVerify -fuzztime $(FUZZTIME) ./internal/verify
	cd services/webhook-api && $(GO) test -run '^$$' -fuzz FuzzPaystackVerify -fuzztime $(FUZZTIME) ./internal/verify
	cd services/webhook-api && $(GO) test -run '^$$' -fuzz FuzzNormalize -fuzztime $(FUZZTIME) ./internal/ingest

## tidy: go mod tidy in every module (-e: see services/payout-worker/go.mod)
tidy:
	@for d in $$($(GO) list -m -f '{{.Dir}}'); do (cd $$d && $(GO) mod tidy -e) || exit 1; done
	@cd deploy && GOWORK=off $(GO) mod tidy
	@cd tools/lint && GOWORK=off $(GO) mod tidy
	@cd tools/sqlc && GOWORK=off $(GO) mod tidy

## tidy-check: fail when a module's go.mod or go.sum is not what `make tidy` would write
tidy-check:
	@for d in $$($(GO) list -m -f '{{.Dir}}'); do \
		(cd $$d && $(GO) mod tidy -e -diff >/dev/null) || { echo "go.mod/go.sum in $$d are stale: run make tidy"; exit 1; }; \
	done
	@(cd deploy && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "deploy/go.mod is stale: run make tidy"; exit 1; }
	@(cd tools/lint && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "tools/lint/go.mod is stale: run make tidy"; exit 1; }
	@(cd tools/sqlc && GOWORK=off $(GO) mod tidy -diff >/dev/null) || { echo "tools/sqlc/go.mod is stale: run make tidy"; exit 1; }

## generate: sqlc compiles each store's queries.sql into its sqlcdb package (sqlc.yaml), and
## aegis-configdoc writes docs/reference/configuration.md from the config readers (its test fails when stale).
## sqlc is pinned in tools/sqlc/go.mod (outside go.work) and built from it without cgo: Postgres's parser
## (pg_query) then runs as WebAssembly, which needs no C toolchain and builds in minutes, not a quarter hour.
SQLC := $(CURDIR)/$(BIN)/sqlc
$(SQLC): tools/sqlc/go.mod tools/sqlc/go.sum
	@mkdir -p $(BIN)
	cd tools/sqlc && GOWORK=off CGO_ENABLED=0 $(GO) build -o $(SQLC) github.com/sqlc-dev/sqlc/cmd/sqlc
generate: $(SQLC)
	$(SQLC) generate
	$(GO) run ./tools/devstack/cmd/aegis-configdoc

## generate-check: fail when the committed generated code is not what `make generate` would write
generate-check: $(SQLC)
	@$(SQLC) diff || { echo "generated SQL code is stale: run make generate"; exit 1; }

## bench: measure the performance targets with the real binaries; writes docs/reports/benchmarks.md
BENCH_DURATION ?= 20s
SCENARIOS ?=
bench: build
	@scripts/devdeps.sh
	$(BIN)/aegis-bench -duration $(BENCH_DURATION) -out docs/reports/benchmarks.md -logs $(BIN)/bench.log $(SCENARIOS)

## chaos: the suite under seeded faults, invariants checked (SEEDS="1 2 3", PROFILE=full,
## CHAOS_FLAGS="-plant-poison" or "-pickup-bound 45s"). PROFILE=week compresses seven days into
## minutes (every duration that matters scaled by one factor; `bin/aegis-chaos -profile week
## -print-scale` lists them); CHAOS_FLAGS=-plant-late-attempt runs it against a payout-worker
## built with -tags chaos (bin/chaos/) saving its first attempt late: it must report a double payment.
## PROFILE=soak is the chaos soak: a long run at a moderate fault rate (DURATION=10m, the first seed
## of SEEDS); writes docs/reports/reliability.md
SEEDS ?= 1 2 3
PROFILE ?= full
CHAOS_FLAGS ?=
DURATION ?= 10m
chaos: build
	@scripts/devdeps.sh
	$(BIN)/aegis-chaos -profile $(PROFILE) -logs $(BIN)/chaos.log $(if $(filter soak,$(PROFILE)),-seeds "$(firstword $(SEEDS))" -duration $(DURATION) -out docs/reports/reliability.md,-seeds "$(SEEDS)") $(CHAOS_FLAGS)

## soak: whether speed lasts: the whole suite at 70% of its sustainable end-to-end credit rate (a step
## search finds it; SOAK_FLAGS="-rate 300" sets the rate) for DURATION (10m; DURATION=1h for the report),
## retention scaled down so it runs: per-window throughput and p99, table sizes, vacuums, plan changes,
## CPU per process and where it went (each service's CPU profile of the first and the last window, kept in
## bin/soak-profiles); writes docs/reports/soak.md and docs/reports/soak.svg, the measurements to
## bin/soak.json (`bin/aegis-soak -render bin/soak.json -out docs/reports/soak.md` writes the report
## again). The chaos soak is make chaos PROFILE=soak
SOAK_FLAGS ?=
soak: build
	@scripts/devdeps.sh
	$(BIN)/aegis-soak -duration $(DURATION) -out docs/reports/soak.md -logs $(BIN)/soak.log -json $(BIN)/soak.json -profiles $(BIN)/soak-profiles $(SOAK_FLAGS)

## compose-check: validate docker-compose.yml (with dev.env's local secrets), with and without the dev profile
compose-check:
	docker-compose --env-file dev.env config -q
	docker-compose --env-file dev.env --profile dev config -q

## rules-check: promtool checks the alert rules, runs their unit tests and checks the Prometheus configs (compose, Kubernetes);
## amtool checks the Alertmanager config and where its main routes go
RULES := services/dlq-admin/alerts/prometheus-rules.yml
rules-check:
	@mkdir -p $(BIN)/prometheus/rules
	@cp deploy/observability/prometheus.yml $(BIN)/prometheus/prometheus.yml
	@cp deploy/observability/prometheus-kubernetes.yml $(BIN)/prometheus/prometheus-kubernetes.yml
	@cp $(RULES) $(BIN)/prometheus/rules/aegis.yml
	promtool check config $(BIN)/prometheus/prometheus.yml
	@# Debian's promtool is built without Kubernetes discovery: then the file is checked with
	@# its kubernetes_sd_configs swapped for a static target (everything else as written).
	@if promtool check config $(BIN)/prometheus/prometheus-kubernetes.yml >$(BIN)/prometheus/k8s-check.log 2>&1; then \
		cat $(BIN)/prometheus/k8s-check.log; \
	elif grep -q 'field kubernetes_sd_configs not found' $(BIN)/prometheus/k8s-check.log; then \
		echo "promtool has no kubernetes_sd_configs: checking prometheus-kubernetes.yml with a static target in its place"; \
		sed -e 's/kubernetes_sd_configs:/static_configs:/' -e 's/- role: pod/- targets: ["pod:9090"]/' \
			deploy/observability/prometheus-kubernetes.yml >$(BIN)/prometheus/prometheus-kubernetes.yml; \
		promtool check config $(BIN)/prometheus/prometheus-kubernetes.yml; \
	else cat $(BIN)/prometheus/k8s-check.log; exit 1; fi
	promtool check rules $(RULES)
	cd $(dir $(RULES)) && promtool test rules prometheus-rules.test.yml
	amtool check-config deploy/observability/alertmanager.yml
	scripts/alertmanager-routes.sh deploy/observability/alertmanager.yml

## deploy-check: render deploy/k8s (kustomize) and validate it strictly against the vendored schemas (kubeconform)
DEPLOY_TOOLS = cd deploy && GOWORK=off $(GO) tool
KUBECONFORM_FLAGS = -strict -schema-location 'k8s/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json'
deploy-check:
	@mkdir -p $(BIN)
	@for overlay in base overlays/production; do \
		echo "kubeconform deploy/k8s/$$overlay"; \
		($(DEPLOY_TOOLS) kustomize build k8s/$$overlay) > $(BIN)/k8s-rendered.yaml || exit 1; \
		($(DEPLOY_TOOLS) kubeconform $(KUBECONFORM_FLAGS) -summary ../$(BIN)/k8s-rendered.yaml) || exit 1; \
	done
	@if ($(DEPLOY_TOOLS) kubeconform $(KUBECONFORM_FLAGS) k8s/schemas/testdata/invalid.yaml) >/dev/null; then \
		echo "deploy-check: kubeconform accepted k8s/schemas/testdata/invalid.yaml; the check is broken"; exit 1; fi
	@echo "kafka ACLs, network policies, scale, resources, stop and migrate Job of deploy/k8s"
	@cd tools/devstack && $(GO) test -count=1 -run 'TestKafkaACLs$$|TestManifests$$|TestMigrateJobFollowsTheRelease$$' ./deploy/

clean:
	rm -rf $(BIN)
