# anarchon: a leaderless cluster-wide cron.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/anarchon/anarchon/internal/cli.Version=$(VERSION) \
           -X github.com/anarchon/anarchon/internal/cli.Commit=$(COMMIT)
BIN     := bin/anarchond
# The jobs' supervising parent, installed beside anarchond (see
# docs/design.md, Processes). It imports only the standard library and is
# built without cgo: a static binary, no dynamic loader on each job start.
SUPERVISE_BIN := bin/anarchon-supervise

.PHONY: build run test test-go test-short bench bench-go bench-claims bench-smoke chaos chaos-ci chaos-ha vet lint clean

build: ## build bin/anarchond and bin/anarchon-supervise
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/anarchond
	CGO_ENABLED=0 $(GO) build -o $(SUPERVISE_BIN) ./cmd/anarchon-supervise

run: build ## run the daemon on configs/example.yaml (SQLite in ./data)
	mkdir -p data
	chmod go-w configs configs/example.yaml
	$(BIN) run --config configs/example.yaml

test: test-go fuzz chaos-ci bench-smoke ## what CI runs: every test against the real stores, a short fuzz of each target, a 60 s chaos run of every backend, a smoke of the benchmarks

# The end-to-end scripts run last and alone: their daemons start hundreds
# of jobs a second, and beside the other packages' race-detector tests on
# two cores their slots could be answered late.
test-go: vet ## every Go test, against the real stores (the fuzz seed corpora included)
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/test/e2e$$')
	$(GO) test -race -count=1 -timeout 20m ./test/e2e

test-short: ## unit tests only
	$(GO) test -short -count=1 ./...

bench: ## every figure of docs/performance.md in one run (about an hour): tables on stdout, bench/results/{results.json,chart.png}
	$(GO) run ./cmd/anarchon-bench

bench-claims: ## the claim tables only (no start lag, no scale): a few minutes
	$(GO) run ./cmd/anarchon-bench -lag-loads '' -scale-jobs 0

bench-smoke: ## every section of the bench, tiny, so that it never rots (figures printed, not asserted)
	$(GO) run ./cmd/anarchon-bench -n 100 -n-rabbitmq 20 -tp-n 20 -tp-n-rabbitmq 5 \
		-ceiling-runs 300 -ceiling-runs-rabbitmq 30 -lag-loads 1,10 -lag-dur 3s -lag-backends sqlite,redis-lease \
		-scale-jobs 1000 -scale-idle 5s -scale-busy 5s -scale-backends sqlite -out ''

bench-go: ## the go test benchmarks of every backend
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./internal/sqliteclaim/ ./internal/pgclaim/ ./internal/redisclaim/ ./internal/natsclaim/
	$(GO) test -run '^$$' -bench . -benchtime 300x ./internal/rabbitclaim/

# Fault injection: anarchond instances on one backend, killed, paused, cut
# off from the store, skewed, starved of CPU around a burst of runs; then
# test/chaos/check reports every broken guarantee. Exit 1 on a violation,
# 2 when the harness cannot run (a store that does not answer). BACKEND:
# sqlite, postgres, redis-lease, redis-stream-id, redis-script, redis-auto,
# nats, rabbitmq.
BACKEND   ?= sqlite
DURATION  ?= 60s
INSTANCES ?= 3
SEED      ?=

chaos-ci: ## a 60 s chaos run of every backend, one after the other (about 10 minutes); fails on any violation
	$(GO) run ./test/chaos -all -duration 60s

chaos: ## fault-injection run of one backend (BACKEND, DURATION, INSTANCES, SEED); output in chaos-out/
	$(GO) run ./test/chaos -backend $(BACKEND) -duration $(DURATION) -instances $(INSTANCES) $(if $(SEED),-seed $(SEED))

# PostgreSQL failover, measured: the failover test of internal/pgclaim/failover
# (daemons on a private primary and streaming standby; the primary killed,
# the standby promoted) HA_ROUNDS times with synchronous replication and as
# many with asynchronous replication, each round's figures on stdout
# (docs/reliability.md). test-go runs one synchronous round.
HA_ROUNDS ?= 3

chaos-ha: ## PostgreSQL failover with synchronous and asynchronous replication, HA_ROUNDS rounds each (about 25 s a round)
	$(GO) test -count=1 -v -timeout 30m -run '^TestFailover$$' ./internal/pgclaim/failover -args -ha.async -ha.rounds $(HA_ROUNDS)

vet: lint ## go vet, gofmt and golangci-lint
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }

# golangci-lint, run through the Go toolchain at a pinned version (nothing
# to install; it is not in go.mod). Its linters and the reason for every
# rule turned off are in .golangci.yml; the code passes with no findings.
GOLANGCI ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

lint: ## golangci-lint with .golangci.yml
	$(GOLANGCI) run ./...

clean:
	rm -rf bin data

# Packages: the .deb and .rpm of bin/anarchond and bin/anarchon-supervise
# into $(DIST), built by nfpm run through the Go toolchain (nothing to
# install; nfpm is not in go.mod). The package's version is $(VERSION) when
# that is a release tag (v1.2.3 or 1.2.3-rc.1, the "v" dropped), else
# 0.0.0-dev; `make package PKG_VERSION=1.2.3` sets it directly.
NFPM        ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
DIST        ?= dist
PKG_VERSION ?= $(shell echo '$(VERSION)' | sed -nE 's/^v?([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?)$$/\1/p' | grep . || echo 0.0.0-dev)

.PHONY: package

# SQLite is linked in: the binary must be built with cgo, as `make build` does
# wherever a C compiler is found; here it is required.
package: export CGO_ENABLED = 1
package: build ## the .deb and .rpm into dist/ (see docs/operating.md)
	mkdir -p $(DIST)
	VERSION='$(PKG_VERSION)' $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(DIST)/
	VERSION='$(PKG_VERSION)' $(NFPM) package --config packaging/nfpm.yaml --packager rpm --target $(DIST)/

# Fuzzing: each target's committed seed corpus (testdata/fuzz and f.Add)
# runs in every `go test`; `make fuzz` also mutates FUZZTIME inputs per target
# (go test -fuzz takes one target at a time). The budget is a count, not a
# duration: Go 1.26's fuzz coordinator can report "context deadline
# exceeded" as a failure when a duration ends while a worker is busy
# (golang/go#75804), which a loaded machine hits; a count has no deadline.
FUZZTIME ?= 30000x
FUZZ_TARGETS := ./internal/config:FuzzParse ./internal/schedule:FuzzParse ./internal/sanitize:FuzzSanitize

.PHONY: fuzz

fuzz: ## a short fuzz run of every fuzz target
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn -fuzztime $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
