# adhost — build, run and test. `make run` and `make test` are all a new
# checkout needs (Go only; modules download from the proxy).

GO       ?= go
CONFIG   ?= host.toml
FUZZTIME ?= 10s
# Plugins: every plugins/<id> directory with a manifests/<id>.toml.
PLUGINS  := $(sort $(foreach d,$(wildcard plugins/*),$(if $(wildcard manifests/$(notdir $(d)).toml),$(notdir $(d)))))
# manifest_version prints the version of manifests/$$id.toml (shell, in recipes).
manifest_version = awk -F'"' '/^[[:space:]]*version[[:space:]]*=/ { print $$2; exit }' manifests/$$id.toml
WASMBUILD = GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -buildvcs=false

.PHONY: all build adhost plugins run run-cluster test e2e soak bench bench-gateway fuzz lint pin check clean

all: build

## build: bin/adhost and every plugin as build/plugins/<id>-<version>.wasm
build: adhost plugins

# bin/adhost is relinked only when a Go source outside the plugins, a file
# internal/ embeds (simulator transcripts) or the module file changed.
ADHOST_SRC := $(shell find . -name '*.go' -not -name '*_test.go' -not -path './plugins/*' -not -path './build/*' -not -path './data/*') \
	$(shell find internal -type f -not -name '*.go') go.mod go.sum
adhost: bin/adhost
bin/adhost: $(ADHOST_SRC)
	@mkdir -p bin
	$(GO) build -trimpath -buildvcs=false -o bin/adhost ./host/cmd/adhost

bin/embedmanifest: $(wildcard tools/embedmanifest/*.go runtime/manifest/*.go abi/*.go)
	@mkdir -p bin
	$(GO) build -trimpath -buildvcs=false -o bin/embedmanifest ./tools/embedmanifest

## plugins: reproducible wasip1 builds with the manifest embedded. One
## rule per plugin, so only a plugin whose sources, manifest, SDK or
## module requirements changed is rebuilt (`make run` stays quick).
plugins: $(foreach id,$(PLUGINS),build/plugins/$(id)-$(shell awk -F'"' '/^[[:space:]]*version[[:space:]]*=/ { print $$2; exit }' manifests/$(id).toml).wasm)

# Sources every plugin depends on: the SDK, the ABI, the module file.
PLUGIN_DEPS := $(shell find sdk-plugin abi -name '*.go' -not -name '*_test.go') go.mod go.sum bin/embedmanifest

define plugin_rule
build/plugins/$(1)-%.wasm: $$(shell find plugins/$(1) -name '*.go' -not -name '*_test.go') manifests/$(1).toml $$(PLUGIN_DEPS)
	@mkdir -p build/plugins
	@echo "plugin $(1)@$$* -> $$@"
	@$$(WASMBUILD) -o build/plugins/$(1).raw.wasm ./plugins/$(1)
	@bin/embedmanifest -manifest manifests/$(1).toml -in build/plugins/$(1).raw.wasm -out $$@
	@rm -f build/plugins/$(1).raw.wasm
endef
$(foreach id,$(PLUGINS),$(eval $(call plugin_rule,$(id))))

## run: build, create the dev token if missing, serve the dev default
## (LISTEN=host:port overrides server.listen, e.g. make run LISTEN=127.0.0.1:8080)
LISTEN ?=
run: build data/dev.token
	@echo "dev token: $(CURDIR)/data/dev.token"
	@echo "  curl -H \"Authorization: Bearer \$$(cat data/dev.token)\" http://$(or $(LISTEN),127.0.0.1:7433)/v1/protocol"
	bin/adhost serve --config $(CONFIG)$(if $(LISTEN), --listen $(LISTEN))

## run-cluster: a JetStream server (bin/natsserver) and two hosts sharing
## sessions, idempotency keys and jobs on it (A :7433 with jobs, B :7434)
run-cluster: build bin/natsserver data/dev.token
	tools/natsserver/run-cluster.sh $(CONFIG)

bin/natsserver: $(wildcard tools/natsserver/*.go) go.mod go.sum
	@mkdir -p bin
	$(GO) build -trimpath -buildvcs=false -o bin/natsserver ./tools/natsserver

data/dev.token:
	@mkdir -p data && chmod 700 data
	@umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > data/dev.token && echo >> data/dev.token
	@chmod 600 data/dev.token
	@echo "created data/dev.token (mode 0600)"

## test: everything the tests need, then the whole suite. The e2e tests run
## uncached (-count=1): they exec binaries and build plugins in subprocesses,
## which Go's test cache cannot see.
test: build
	@status=0; \
	$(GO) test -timeout 15m $$($(GO) list ./... | grep -v '^adhost/e2e$$') || status=1; \
	ADHOST_BIN=$(CURDIR)/bin/adhost $(GO) test -count=1 -timeout 10m ./e2e/... || status=1; \
	mkdir -p build; \
	$(GO) test -count=1 -v -run '^(TestJSONSchemaTestSuite|TestClientFixtures)$$' ./runtime/schema ./client \
		> build/suites.log 2>&1 || { cat build/suites.log; status=1; }; \
	grep -E '^(jsonschema|client-fixtures):' build/suites.log || true; \
	exit $$status

## e2e: only the end-to-end tests (they build what they need)
e2e: build
	ADHOST_BIN=$(CURDIR)/bin/adhost $(GO) test -count=1 -timeout 10m ./e2e/...

## soak: the bounded soak (not in `make test`): 32 clients mixing JSON
## and SSE runs, tool runs, cancellations and queued runs against the real
## binary for SOAK (default 10m), then leak checks (e2e TestSoak); then
## two hosts on one JetStream with 1,000 jobs across a kill -9
## (e2e TestClusterJobsKill; make test runs it with 200)
SOAK ?= 10m
soak: build
	ADHOST_BIN=$(CURDIR)/bin/adhost ADHOST_SOAK=$(SOAK) $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 60m ./e2e/
	ADHOST_BIN=$(CURDIR)/bin/adhost ADHOST_CLUSTER_JOBS=1000 $(GO) test -count=1 -v -run '^TestClusterJobsKill$$' -timeout 20m ./e2e/

## bench: every benchmark (see the issue notes for the targets).
## BenchmarkTelemetryOverhead runs on its own, at 64,000 runs a side: its
## 64 alternating rounds need ~1,000 runs each to hold ~30 export batches,
## and at the default benchtime they held a few (its ratio scattered
## 0.88-1.02 then, against 0.89-0.97 at this length).
bench: build
	ADHOST_BIN=$(CURDIR)/bin/adhost $(GO) test -run '^$$' -bench . -skip '^BenchmarkTelemetryOverhead$$' -benchmem -timeout 60m ./...
	$(GO) test -run '^$$' -bench '^BenchmarkTelemetryOverhead$$' -benchtime 64000x -benchmem ./internal/bench/

## bench-gateway: direct, bare proxy, adhost and Portkey side by side
## (GATEWAY_BENCH/run.sh): C clients of one subject (default 8), N requests
## per target (default 3000). Portkey comes from npm; without npm it is
## skipped with a message (PORTKEY=0 skips it anyway).
GATEWAY_BENCH ?= ../shared/bench/gateway
C ?= 8
N ?= 3000
bench-gateway: build
	@test -x $(GATEWAY_BENCH)/run.sh || { echo "bench-gateway: $(GATEWAY_BENCH)/run.sh not found (set GATEWAY_BENCH)" >&2; exit 1; }
	@command -v python3 >/dev/null || { echo "bench-gateway: python3 is required (free ports)" >&2; exit 1; }
	@pk=$${PORTKEY:-1}; \
	if [ "$$pk" != 0 ] && ! { command -v npm && command -v node; } >/dev/null; then \
		echo "bench-gateway: npm/node not found: skipping Portkey (install Node.js with npm to compare with it)" >&2; pk=0; \
	fi; \
	echo "bench-gateway: C=$(C) N=$(N) PORTKEY=$$pk"; \
	PORTKEY=$$pk C=$(C) N=$(N) $(GATEWAY_BENCH)/run.sh $(CURDIR) || { \
		st=$$?; echo "bench-gateway: run.sh failed (exit $$st); errors in its warm-up (e.g. BUSY above the per-subject limit) end it silently" >&2; exit $$st; }

## fuzz: each fuzz target for FUZZTIME (default 10s)
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## lint: go vet for the host and for the wasip1 builds
lint:
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... ./sdk-plugin/... $(addprefix ./plugins/,$(PLUGINS))
	@if [ -f tools/go.mod ]; then $(GO) tool -modfile=tools/go.mod staticcheck ./...; fi

## pin: rebuild the plugins and rewrite the sha256 pins already in host.toml
pin: build
	@set -e; for id in $(PLUGINS); do \
		ver=$$($(manifest_version)); \
		bin/adhost plugins pin --config $(CONFIG) --write --existing $$id@$$ver build/plugins/$$id-$$ver.wasm; \
	done

## check: what CI runs beyond `make test`
check: lint build
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) test -race -short -timeout 20m ./...
	bin/adhost plugins verify --config $(CONFIG)

clean:
	rm -rf bin build
