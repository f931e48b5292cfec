# voucherd developer commands; `make` alone lists them.
# Tests start their own PostgreSQL, Redis and Kafka (internal/testenv);
# `deps` installs the binaries they need when missing. `run` installs only
# what running needs (scripts/deps.sh run|kafka|test says what each needs).

GO      ?= go
ARGS    ?=
PKGS    ?= ./...
TIMEOUT ?= 40m
# Packages with shared state across goroutines; make test runs them again
# under the race detector.
# Tests write artifacts here (the live page's screenshot from headless Chromium).
export VOUCHERD_TEST_ARTIFACTS ?= $(CURDIR)/test-artifacts
RACE_PKGS ?= ./internal/pgstore ./internal/redisgate ./internal/voucher ./internal/kafkalog ./internal/live ./internal/bench ./client

.DEFAULT_GOAL := help
.PHONY: help deps deps-run deps-kafka build run clean-dev test test-api test-race test-faults bench lint

# ARGS asks for Kafka when it holds --kafka (or -kafka, --kafka=true).
WANTS_KAFKA := $(filter --kafka -kafka --kafka=true -kafka=true,$(ARGS))

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install what the test suite needs if missing (PostgreSQL, Redis, Java 17, Maven, Chromium, curl, Python); fetch the Kafka jars, Schemathesis, openapi-python-client and the lint tools once
	@scripts/deps.sh test
	@bash scripts/kafka.sh fetch >/dev/null
	@scripts/schemathesis.sh >/dev/null
	@scripts/openapi-python-client.sh >/dev/null
	@GO=$(GO) scripts/lint.sh tools

deps-run: ## install what `make run` needs if missing: PostgreSQL and Redis (with ARGS=--kafka also Java 17, Maven, the Kafka jars)
	@scripts/deps.sh run
	@$(if $(WANTS_KAFKA),$(MAKE) --no-print-directory deps-kafka)

deps-kafka: ## install what a Kafka broker needs if missing (PostgreSQL, Redis, Java 17, Maven); fetch the Kafka jars once
	@scripts/deps.sh kafka
	@bash scripts/kafka.sh fetch >/dev/null

build: ## build bin/voucherd
	$(GO) build -o bin/voucherd ./cmd/voucherd

run: deps-run build ## run voucherd dev (local PostgreSQL and Redis; ARGS=--kafka adds Kafka)
	bin/voucherd dev $(ARGS)

clean-dev: ## delete voucherd dev's data (.voucherd-dev/) to start the examples over; or run `voucherd dev --reset`
	rm -rf .voucherd-dev

test: deps ## make lint, then the whole suite against real services (Schemathesis included), -race on the concurrent packages, combining off
	@GO=$(GO) scripts/lint.sh $(PKGS)
	$(GO) test -count=1 -timeout $(TIMEOUT) $(PKGS)
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(RACE_PKGS)
	@echo "--- again with PostgreSQL write combining off (both write paths keep every invariant)"
	VOUCHERD_TEST_COMBINING=off $(GO) test -count=1 -timeout $(TIMEOUT) -skip TestSchemathesis ./internal/pgstore ./cmd/voucherd

test-api: deps ## Schemathesis (every check) against a running voucherd with PostgreSQL and Redis, alone
	$(GO) test -count=1 -timeout 10m -v -run 'TestSchemathesis' ./cmd/voucherd

test-race: deps ## the internal packages' tests with the race detector
	$(GO) test -race -count=1 -timeout $(TIMEOUT) ./internal/...

test-faults: deps ## fault-injection suite, long form: seeds x modes under kill/pause/restart (docs/faults.md)
	VOUCHERD_FAULTS=long $(GO) test -count=1 -timeout $(TIMEOUT) -v -run 'TestFaults' ./internal/faults

bench: deps-kafka build ## flash-sale load test with invariant checks (bin/voucherd bench; ARGS passed on)
	bin/voucherd bench $(ARGS)

lint: ## gofmt, go vet, golangci-lint (.golangci.yml), govulncheck against an offline vulnerability database (tools pinned in scripts/lint.sh, installed once)
	@GO=$(GO) scripts/lint.sh $(PKGS)
