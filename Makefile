# Karpenter provider for Clever Kubernetes Engine.
# Every target works on a fresh machine with Go and the Go module proxy: tools are pinned in
# tools/go.mod, the simulated CKE's Kubernetes binaries in sim/tools/*/go.mod.

export GOTOOLCHAIN := go1.27.3
# GOFLAGS from the environment is kept (e.g. GOFLAGS=-exec=… to time each test binary).
export GOFLAGS := -buildvcs=false $(GOFLAGS)
export CUE_REGISTRY := none

SHELL := /usr/bin/env bash -o pipefail
# The spelling of the project's original README works too:
# `make image IMAGE=<registry>/karpenter-clevercloud TAG=v0.12.0` is KO_DOCKER_REPO and VERSION
# (ko pushes; there is no separate docker push).
ifdef IMAGE
KO_DOCKER_REPO := $(IMAGE)
endif
ifdef TAG
VERSION := $(TAG)
endif
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
MODULE := github.com/CleverCloud/karpenter-provider-clever-cloud
LDFLAGS := -s -w -X $(MODULE)/controller/version.Version=$(VERSION)
TOOLS := go tool -modfile=tools/go.mod
BIN := $(CURDIR)/bin
# The controller `make build` builds, which the simulated CKE's stack (sim/stack) runs instead of
# building its own inside a test's deadline.
STACK_ENV := KARPENTER_CLEVERCLOUD_BINARY=$(BIN)/karpenter-clevercloud

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the controller into bin/karpenter-clevercloud.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/karpenter-clevercloud ./controller

.PHONY: run
run: build ## Run the controller against the current kubeconfig, leader election off.
	DISABLE_LEADER_ELECTION=true $(BIN)/karpenter-clevercloud

##@ Generation

.PHONY: generate
generate: ## Regenerate the CRD's owned-label rule, deepcopy, CRDs, schemas, the embedded catalogue, out/, docs/reference/ and docs/e2e-scenarios.md.
	go run ./hack/celmarker
	$(TOOLS) controller-gen object paths=./controller/apis/...
	$(TOOLS) controller-gen crd paths=./controller/apis/v1alpha1/... output:crd:artifacts:config=controller/apis/crds
	./hack/generate-bundle.sh
	go run ./hack/docgen
	go run ./hack/scenarios

.PHONY: verify
verify: generate ## Fail if generated files are stale.
	@git diff --exit-code -- controller schema out flavors cue docs/reference docs/e2e-scenarios.md || { echo "generated files are stale: run 'make generate' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- controller schema out docs/reference docs/e2e-scenarios.md)" || { git status --porcelain -- controller schema out docs/reference docs/e2e-scenarios.md; echo "untracked generated files: run 'make generate' and commit" >&2; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "unformatted Go files: run gofmt -w" >&2; exit 1; }
# Relative links and #anchors of README.md, CHANGELOG.md, docs/ and examples/ resolve, as GitHub
# renders them; make test runs the same check as hack/doclinks' test.
	go run ./hack/doclinks
# Unused code fails: U1000 on the whole tree with the bench tag, so the bench's files, which
# neither make test nor a plain build compiles, are checked too (no file is excluded by the
# tag, so one run covers both builds); the bench itself must vet.
	$(TOOLS) staticcheck -checks U1000 -tags bench ./...
	go vet -tags bench ./test/bench/...

##@ Test

.PHONY: sim-bin
sim-bin: ## Build the simulated CKE's pinned Kubernetes binaries (cached by pin).
	@./sim/tools/build.sh >/dev/null

# How many test packages run at once. Most of make test's time is end-to-end packages waiting
# on the simulated CKE's timers, each on a cluster of its own, so more than the cores pays; on
# two cores, sixteen at once starved the apiservers until controllers lost their leader lease.
TEST_PARALLEL ?= 8
# go test starts packages in the order it is given them: the longest (docs/e2e.md's timings)
# first, then the other end-to-end packages, so none of them starts last, behind dozens of
# short unit packages. A package named twice runs once; an outdated order only costs time.
TEST_PACKAGES ?= ./test/e2e/repair ./test/e2e/quota/leader ./test/e2e/quota/uptake ./test/e2e/launch ./test/e2e/disruption ./test/e2e/quota/lowered ./sim \
	./test/e2e/quota/raised ./test/e2e/quota/probes ./test/e2e/quota/headroom ./test/e2e/quota/configured ./test/lifecycle \
	./test/e2e/pricing ./test/conformance ./test/e2e/restart ./test/e2e/provisioning ./test/e2e/steering ./test/e2e/ownership ./hack/release ./cue \
	./test/quotasim ./test/e2e/... ./...

.PHONY: test
test: sim-bin build ## Run every test: unit, integration on a real apiserver, simulator, e2e, brief fuzzing (TEST_PARALLEL packages at once).
	go build ./...
	go vet ./...
	cd sim/tools/kwok && go test -count=1 ./...
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) go test -count=1 -timeout 30m -p $(TEST_PARALLEL) $(TEST_PACKAGES)
	$(MAKE) fuzz FUZZTIME=10s

FUZZTIME ?= 2m
.PHONY: fuzz
fuzz: ## Fuzz the price-API decoders, the quota-message parser, the label rule and the settings' URL rule (FUZZTIME each; CI runs 10s).
	go test -run '^$$' -fuzz '^FuzzDecodeProduct$$' -fuzztime $(FUZZTIME) ./controller/pricing/pricedoc
	go test -run '^$$' -fuzz '^FuzzDecodePriceSystem$$' -fuzztime $(FUZZTIME) ./controller/pricing/pricedoc
	go test -run '^$$' -fuzz '^FuzzParseQuotaMessage$$' -fuzztime $(FUZZTIME) ./controller/nodegroup
	go test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(FUZZTIME) ./controller/labels
	go test -run '^$$' -fuzz '^FuzzURLPatternIsAccepted$$' -fuzztime $(FUZZTIME) ./controller/settings

SOAK_SEEDS ?= 5000
.PHONY: soak
soak: ## Run the deterministic quota simulation over many more seeds than make test (SOAK_SEEDS, 3 simulated hours each).
	go test -count=1 -timeout 120m -run '^TestSeeds$$' -v ./test/quotasim -quotasim.seeds=$(SOAK_SEEDS) -quotasim.duration=3h

.PHONY: e2e
e2e: sim-bin build ## Run the end-to-end packages only, side by side (the shipped bundle and binary on the simulated CKE).
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) go test -count=1 -timeout 30m -p $(TEST_PARALLEL) -v ./test/e2e/...

.PHONY: conformance
conformance: sim-bin build ## Run Karpenter core's own e2e suites on the simulated CKE (~40 min); writes docs/conformance/ (CONFORMANCE_FULL=1: long timers too; CONFORMANCE_PARALLEL=1: suites side by side).
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) go run ./test/conformance/cmd/conformance

# Where make performance writes performance.{md,json}; PERF_FOCUS runs only the tests it matches;
# PERF_AUDIT=1 keeps the apiserver's audit log (who made which request) in the work folder;
# PERF_EXPLORE=1 lifts the time, heap and CPU limits so every phase runs (performance-explore.{md,json});
# PERF_BASELINE=1 runs core's kwok provider in place of ours (performance-baseline.{md,json}).
# PERF_ENV=KEY=VALUE[,…] sets the controller's environment over the bundle's (COST_STEERING=false beside an as-shipped run; performance-env.{md,json}).
PERF_OUT ?= docs/conformance
.PHONY: performance
performance: sim-bin build ## Run Karpenter core's performance suite on the simulated CKE (hours on 2 cores; never in make test); writes $(PERF_OUT)/performance.{md,json}.
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) go run ./test/conformance/cmd/conformance -performance -out $(PERF_OUT) $(if $(PERF_FOCUS),-focus '$(PERF_FOCUS)') $(if $(PERF_AUDIT),-audit) $(if $(PERF_EXPLORE),-explore) $(if $(PERF_BASELINE),-baseline) $(if $(PERF_ENV),-env '$(PERF_ENV)')

.PHONY: demo
demo: build ## Tell the provider's story on the simulated CKE, then tear down (DEMO_FLAGS=--keep to explore).
	$(STACK_ENV) go run ./sim/cmd/demo $(DEMO_FLAGS)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Benchmarks

# Simulator profiles for `make bench`: live (CKE's measured timings), fast, or both (every
# scenario on live, the ones with targets on fast too).
BENCH_PROFILE ?= both

.PHONY: bench
bench: sim-bin build ## Run every benchmark scenario on the simulated CKE, live profile and fast beside it, the cost workloads with steering on and off (~2 h); writes docs/bench/.
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) BENCH_OUT=docs/bench BENCH_PROFILE=$(BENCH_PROFILE) go test -tags bench -count=1 -timeout 180m -run 'TestBench$$' -v ./test/bench

STEERING_PROFILE ?= fast
.PHONY: bench-steering
bench-steering: sim-bin build ## Run each cost workload with cost steering on and off (STEERING_PROFILE fast or live, ~1 h); writes docs/bench/steering-$(STEERING_PROFILE)/.
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) BENCH_OUT=docs/bench/steering-$(STEERING_PROFILE) BENCH_PROFILE=$(STEERING_PROFILE) go test -tags bench -count=1 -timeout 150m -run 'TestCostSteering$$' -v ./test/bench

.PHONY: bench-replacement
bench-replacement: sim-bin build ## Run the replacement of ill-shaped nodes on fleets core packed alone (STEERING_PROFILE, ~30 min); writes docs/bench/replacement-$(STEERING_PROFILE)/.
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) BENCH_OUT=docs/bench/replacement-$(STEERING_PROFILE) BENCH_PROFILE=$(STEERING_PROFILE) go test -tags bench -count=1 -timeout 120m -run 'TestCostReplacement$$' -v ./test/bench

.PHONY: bench-smoke
bench-smoke: sim-bin build ## One tiny benchmark scenario on the fast profile (< 1 min), report in bin/bench-smoke/.
	KUBEBUILDER_ASSETS=$$(./sim/tools/build.sh) $(STACK_ENV) BENCH_OUT=bin/bench-smoke go test -count=1 -timeout 5m -run 'TestSmoke$$' -v ./test/bench

##@ Release

# Where releases go. Its base, next to it, is the one ko.yaml pins, so a release there and a
# plain `ko apply` build on the same base. Point both elsewhere to build your own; the dev loop
# (`export KO_DEFAULTBASEIMAGE=$(make -s base)`) takes KO_DOCKER_REPO from the environment.
KO_DOCKER_REPO ?= ghcr.io/clevercloud/karpenter-provider-clever-cloud
BASE_REPO ?= $(KO_DOCKER_REPO)/base
DIST ?= $(CURDIR)/dist
RELEASE_ENV := VERSION=$(VERSION) KO_DOCKER_REPO=$(KO_DOCKER_REPO) BASE_REPO=$(BASE_REPO) DIST=$(DIST) KO=$(BIN)/ko CUE=$(BIN)/cue

# Built once from tools/go.mod, again only when the pins move (ko takes minutes cold).
$(BIN)/ko: tools/go.mod tools/go.sum
	go build -modfile=tools/go.mod -o $@ github.com/google/ko
$(BIN)/cue: tools/go.mod tools/go.sum
	go build -modfile=tools/go.mod -o $@ cuelang.org/go/cmd/cue

# The docs' bare `cue` and `ko` lines run these, once bin/ is on PATH; a fresh shell may default
# to GOTOOLCHAIN=local, which the pins refuse, so the hint says to export it too.
.PHONY: tools
tools: $(BIN)/cue $(BIN)/ko ## Build the pinned cue and ko into bin/; put bin/ on PATH for the docs' bare cue and ko commands.
	@echo 'tools: bin/cue and bin/ko are built; for bare cue and ko commands: export PATH="$$PWD/bin:$$PATH" GOTOOLCHAIN=$(GOTOOLCHAIN)' >&2

.PHONY: base
base: ## Push the minimal base image (pinned inputs, same digest every time) to BASE_REPO, print its reference.
	$(RELEASE_ENV) ./hack/release/release.sh base

.PHONY: image
image: $(BIN)/ko ## Build and push the controller image (both platforms, SBOM) to KO_DOCKER_REPO.
	$(RELEASE_ENV) ./hack/release/release.sh image

.PHONY: render
render: $(BIN)/cue ## make render IMAGE=<registry>/<name>@sha256:… [VALUES=my-values.yaml] [OUT=install.yaml]: the install YAML, for an image a cluster can pull.
	@IMAGE='$(IMAGE)' VALUES='$(VALUES)' OUT='$(OUT)' VERSION='$(RENDER_VERSION)' CUE='$(BIN)/cue' ./hack/render.sh

# The alerts' runbook links name a release only where its tree exists: the VERSION a user gives,
# or the tag the checkout is at. git describe's v1.2.3-4-gabc1234 would pass for a pre-release
# and link a tag no one made; anything else links main.
RENDER_VERSION = $(if $(filter file,$(origin VERSION)),$(shell git describe --tags --exact-match 2>/dev/null),$(VERSION))

# make bundle is make release's rendering for users: it never touches CHANGELOG.md and stamps no
# release, and it writes where the user says, so the bundle can live beside their values file,
# outside the checkout.
.PHONY: bundle
bundle: $(BIN)/cue $(if $(IMAGE),,$(BIN)/ko) ## make bundle BUNDLE_DIR=<dir> IMAGE=<ref> | KO_DOCKER_REPO=<registry>/<name> [VALUES=values.yaml]: crds.yaml, karpenter.yaml, install.yaml for an image you pulled, or build and push one first.
	@[[ -n '$(BUNDLE_DIR)' ]] || { echo 'bundle: set BUNDLE_DIR to the directory to write crds.yaml, karpenter.yaml and install.yaml into' >&2; exit 1; }
	@image='$(IMAGE)'; \
	if [[ -z $$image ]]; then \
		[[ '$(origin KO_DOCKER_REPO)' != file ]] || { echo 'bundle: give IMAGE=<registry>/<name>@sha256:… (an image you pushed or pulled), or KO_DOCKER_REPO=<registry>/<name> to build and push one from this checkout' >&2; exit 1; }; \
		image=$$($(RELEASE_ENV) ./hack/release/release.sh image) || exit 1; \
	fi; \
	IMAGE="$$image" VALUES='$(VALUES)' OUT_DIR='$(BUNDLE_DIR)' VERSION='$(RENDER_VERSION)' CUE='$(BIN)/cue' ./hack/render.sh

# The dev loop with a values file: out/ holds the defaults only, so `ko apply -f out/` cannot
# carry values. DEV_KO is the ko it runs (a test swaps in its own to see what ko is given).
DEV_KO ?= $(BIN)/ko
.PHONY: dev
dev: $(BIN)/cue $(BIN)/ko ## make dev KO_DOCKER_REPO=<registry>/<name> [VALUES=values.yaml]: the dev loop with your values: render them, then ko builds, pushes and applies.
	@[[ '$(origin KO_DOCKER_REPO)' != file ]] || { echo 'dev: set KO_DOCKER_REPO to a registry you can push to and the cluster can pull from' >&2; exit 1; }
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	DEV=1 VALUES='$(VALUES)' OUT_DIR="$$dir" CUE='$(BIN)/cue' ./hack/render.sh && \
	base=$${KO_DEFAULTBASEIMAGE:-$$($(RELEASE_ENV) ./hack/release/release.sh base)} && \
	KO_DOCKER_REPO='$(KO_DOCKER_REPO)' KO_DEFAULTBASEIMAGE="$$base" VERSION='$(VERSION)' '$(DEV_KO)' apply -f "$$dir/install.yaml"

.PHONY: release
release: $(BIN)/ko $(BIN)/cue ## make release VERSION=vX.Y.Z KO_DOCKER_REPO=…: image + digest-pinned dist/.
	$(RELEASE_ENV) ./hack/release/release.sh release
