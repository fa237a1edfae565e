# BetCode build, test and tooling. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := bin
MODULES := shared agent relay
PKGS := ./shared/... ./agent/... ./relay/...
TOOLS := $(HOME)/.cache/betcode/bin
STATICCHECK_VERSION := v0.8.2
# promtool's Go module version when no Debian package provides it (v0.301.0 is Prometheus 3.1.0).
PROMTOOL_VERSION := v0.301.0
# The relay's Helm chart is rendered and validated offline (make deploy-check, relay/deploytest).
HELM_VERSION := v3.22.0
KUBECONFORM_VERSION := v0.8.0
# make release's SBOMs (docs/releasing.md).
CYCLONEDX_GOMOD_VERSION := v1.10.0
# A binary's version: the release tag (vX.Y.Z, not the per-module agent/vX.Y.Z ones) when HEAD has
# one, else the version being developed (shared/buildinfo.Dev) plus what git describes: v0.2.0-dev+669d2cc-dirty.
DEV_VERSION := v$(shell sed -n 's/^const Dev = "\(.*\)"/\1/p' shared/buildinfo/buildinfo.go)
VERSION ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null || echo "$(DEV_VERSION)+$$(git describe --always --dirty --exclude='*' 2>/dev/null || echo unknown)")
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: help build test test-deps unit lint vet fmt-check staticcheck deps-check bench demo claude clean tidy fuzz fuzz-ci compat

help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: web ## build every binary into bin/ (the web app first: make web)
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./agent/cmd/betcode-agent ./agent/cmd/betcode ./relay/cmd/betcode-relay ./shared/cmd/fakeapi

claude: ## install the pinned Claude Code CLI into ~/.cache/betcode (once)
	@./scripts/install-claude.sh >/dev/null

.PHONY: codex
codex: ## install the pinned OpenAI Codex CLI into ~/.cache/betcode (once; docs/codex.md)
	@./scripts/install-codex.sh >/dev/null

.PHONY: acp
acp: ## install the pinned real ACP agent (claude-agent-acp) into ~/.cache/betcode (once; docs/providers.md)
	@./scripts/install-acp.sh >/dev/null

# Claude Code releases make compat runs the end-to-end suites against: versions, or min (the
# oldest supported, versions.TestedMin), pinned (versions.Pinned), latest (newest on npm).
COMPAT_VERSIONS ?= min pinned latest

compat: ## the end-to-end suites against each of COMPAT_VERSIONS; a table per version (docs/compat.md)
	COMPAT_VERSIONS="$(COMPAT_VERSIONS)" GO=$(GO) ./scripts/compat.sh

test-deps: claude codex acp $(TOOLS)/cyclonedx-gomod ## tools the tests drive: tmux (terminal tests), promtool (metrics and alert rules), the Claude and Codex CLIs, the ACP agent, chromium and playwright-core (browser tests), helm and kubeconform (the relay's chart)
	@command -v tmux >/dev/null || { echo "installing tmux"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq tmux >/dev/null; \
	  else echo "tmux is missing: apt-get install tmux"; exit 1; fi; }
	@command -v systemd-analyze >/dev/null || { echo "installing systemd (systemd-analyze checks the agent's unit)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd >/dev/null; \
	  else echo "systemd-analyze is missing: apt-get install systemd"; exit 1; fi; }
	@command -v promtool >/dev/null || [ -x $(TOOLS)/promtool ] || { echo "installing promtool"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq && \
	    apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 && command -v promtool >/dev/null; then :; \
	  else GOBIN=$(TOOLS) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION); fi; }
	@command -v helm >/dev/null || [ -x $(TOOLS)/helm ] || { echo "installing helm $(HELM_VERSION) (the relay's chart)"; \
	  GOBIN=$(TOOLS) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }
	@command -v kubeconform >/dev/null || [ -x $(TOOLS)/kubeconform ] || { echo "installing kubeconform $(KUBECONFORM_VERSION)"; \
	  GOBIN=$(TOOLS) $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION); }
	@command -v shellcheck >/dev/null || { echo "installing shellcheck (scripts/install.sh)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; \
	  else echo "shellcheck is missing: apt-get install shellcheck"; exit 1; fi; }
	@[ -x /usr/bin/chromium ] || { echo "installing chromium (browser tests)"; sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@[ web/e2e/node_modules/.package-lock.json -nt web/e2e/package-lock.json ] || { echo "installing web/e2e's node modules"; \
	  cd web/e2e && npm ci --no-audit --no-fund >/dev/null; }

.PHONY: deploy-check
deploy-check: ## the deploy/ artefacts: the relay's Helm chart (helm lint, helm template + kubeconform for several values), docker-compose.yaml, the Dockerfiles (make unit runs it too)
	@command -v helm >/dev/null || [ -x $(TOOLS)/helm ] || { echo "helm is missing: make test-deps"; exit 1; }
	PATH="$$PATH:$(TOOLS)" $(GO) test -race -count=1 ./relay/deploytest/

.PHONY: image
image: ## the relay's container image without Docker (relay/internal/image): OCI layout dist/image/ and dist/betcode-relay-image.oci.tar, linux/amd64+arm64, non-root, SBOM attached (docs/deploy.md)
	$(GO) run ./relay/cmd/betcode-relay-image --out dist/image --archive dist/betcode-relay-image.oci.tar \
	  --version '$(VERSION)' --revision "$$(git rev-parse HEAD)" --created "$$(git log -1 --format=%ct)"

.PHONY: screenshots
screenshots: test-deps web ## the web app's screenshots in docs/screenshots (phone and laptop, light and dark), of the app as built from web/
	cd relay && BETCODE_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run '^TestBrowser(Screenshots|InboxThroughRelay|ShareThroughRelay|VoiceThroughRelay)$$' ./e2e/

test: test-deps lint web-check unit fuzz-ci ## what CI runs: lint, proto checks, the web app rebuilt reproducibly, every test with -race, a bounded fuzz run

unit:
	PATH="$$PATH:$(TOOLS)" $(GO) test -race -count=1 -timeout 20m $(PKGS)

lint: fmt-check vet staticcheck deps-check buf-lint proto-check buf-breaking ## all static checks

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(TOOLS)/staticcheck
	$(TOOLS)/staticcheck $(PKGS)

deps-check: ## imports point one way: relay and agent never import each other
	@bad=$$(cd agent && $(GO) list -deps ./... | grep -E 'betcode/relay' || true); \
	  if [ -n "$$bad" ]; then echo "agent imports relay: $$bad"; exit 1; fi
	@bad=$$(cd relay && $(GO) list -deps ./... 2>/dev/null | grep -E 'betcode/agent' || true); \
	  if [ -n "$$bad" ]; then echo "relay imports agent: $$bad"; exit 1; fi
	@bad=$$(cd shared && $(GO) list -deps ./... | grep -E 'betcode/(agent|relay)' || true); \
	  if [ -n "$$bad" ]; then echo "shared imports agent or relay: $$bad"; exit 1; fi

# The chaos soak (relay/chaos): 3 relay replicas on one PostgreSQL of its own behind a TCP balancer,
# agents and clients, and a seeded schedule of overlapping faults. make test runs its bounded default
# (TestChaosSoak: 30 s of faults, 10 agents, 5 clients; 3-4 min on 2 busy cores); make chaos runs it
# long and rewrites docs/reliability.md and docs/reliability-timeline.png. CHAOS_SEED=N replays a run.
CHAOS_DURATION ?= 10m
CHAOS_AGENTS ?= 50
CHAOS_REAL_AGENTS ?= 4
CHAOS_CLIENTS ?= 20
CHAOS_ENROLLS ?= 4

.PHONY: chaos
chaos: claude ## the chaos soak's long run (CHAOS_DURATION, CHAOS_AGENTS, CHAOS_CLIENTS, CHAOS_SEED): docs/reliability.md
	cd relay && CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_AGENTS=$(CHAOS_AGENTS) CHAOS_REAL_AGENTS=$(CHAOS_REAL_AGENTS) \
	  CHAOS_CLIENTS=$(CHAOS_CLIENTS) CHAOS_ENROLLS=$(CHAOS_ENROLLS) CHAOS_RACE=0 CHAOS_REPORT_DIR=$(CURDIR)/docs \
	  $(GO) test -count=1 -timeout 90m -run '^TestChaosSoak$$' -v ./chaos/

bench: claude ## run the benchmarks of docs/benchmarks.md
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 5 ./agent/eventlog/ ./agent/session/ ./agent/server/ ./agent/sessionsvc/ | tee bench.out

# The relay at scale (relay/bench BenchmarkScale, docs/benchmarks-relay.md "Scale"): SCALE idle tunnels
# from tunnelfleet on one betcode-relay process (RSS per tunnel, connects/s), then the relay killed and
# restarted and the time until all are back (SCALE_RESTART=0 skips it). 100,000 take ~25 min and ~12 GB
# here; make test runs only TestIdleTunnelMemory (2,000 tunnels).
SCALE ?= 100000
SCALE_RESTART ?= 1
.PHONY: bench-relay-scale
bench-relay-scale: ## the relay with SCALE idle tunnels (default 100,000), killed and restarted: docs/benchmarks-relay.md
	cd relay && BETCODE_BENCH_SCALE=$(SCALE) BETCODE_BENCH_SCALE_RESTART=$(SCALE_RESTART) \
	  $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 90m ./bench/

# Every decoder of untrusted input, as package:target.
FUZZ_TARGETS := ./agent/claude/:FuzzDecodeLine ./agent/bridge/:FuzzTranslate ./agent/transcripts/:FuzzImportLine \
  ./shared/tunnel/:FuzzFrameDecode ./shared/tunnel/:FuzzUnframe ./shared/authtoken/:FuzzParse \
  ./relay/pki/:FuzzSignMachineCSR ./relay/limits/:FuzzMessageLimitReader \
  ./agent/codex/:FuzzDecodeLine ./shared/fakeopenai/:FuzzParseRequest \
  ./agent/openaiapi/:FuzzParseCall ./agent/openaiapi/:FuzzDecodeHistory \
  ./agent/acp/:FuzzTranslate ./agent/acp/:FuzzWithin \
  ./relay/internal/h2front/:FuzzFrames ./shared/h2client/:FuzzServerFrames \
  ./shared/e2ee/:FuzzAccept ./shared/e2ee/:FuzzParsePairingCode ./shared/e2ee/:FuzzOpenSealed \
  ./agent/channelsvc/:FuzzWebFrames ./shared/h2wire/:FuzzDataMerger ./relay/internal/grpcstream/:FuzzRecvMsg
FUZZTIME ?= 30s
# make test's bounded run counts executions instead of timing them: a -fuzztime duration can end
# with a bare "context deadline exceeded" and no failing input when a worker is starved at the
# deadline (a race in Go's fuzz coordinator, go.dev/issue/75804, fixed in Go 1.27); a count has no
# deadline to race. 20000 inputs take 3-10 s per target here.
FUZZ_CI_COUNT ?= 20000x

fuzz: ## fuzz every decoder of untrusted input for FUZZTIME each (make test runs FUZZ_CI_COUNT inputs each)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/betcode-fuzz.log 2>&1 || { cat /tmp/betcode-fuzz.log; exit 1; }; done

fuzz-ci: ## the bounded fuzz run of make test
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_CI_COUNT)

demo: build claude codex ## run the whole system against the fake model API (no account needed); KEEP=1 keeps it running until Ctrl-C
	DEMO_KEEP=$(KEEP) ./scripts/demo.sh

# go mod tidy ignores go.work, so agent and relay would look for the shared module they require
# (v0.2.0, not yet tagged) on the internet: a file:// proxy serves the working tree's shared at that
# version, into a private module cache (a real one would keep that content as v0.2.0 for good), and
# go.sum keeps no line for it (the workspace resolves it).
tidy: ## go mod tidy of every module (shared served locally at the version agent and relay require)
	@tmp=$$(mktemp -d); trap 'chmod -R u+w $$tmp; rm -rf $$tmp' EXIT; \
	  v=$$(sed -n 's|^[[:space:]]*github.com/betcode-dev/betcode/shared \(v[^ ]*\).*|\1|p' agent/go.mod); \
	  $(GO) run ./shared/cmd/modproxy -dir $$tmp/proxy shared=$$v >/dev/null; \
	  for m in $(MODULES); do echo "go mod tidy ($$m)"; (cd $$m && GOWORK=off GOFLAGS=-modcacherw GOMODCACHE=$$tmp/mod \
	    GOPROXY=file://$$tmp/proxy,file://$$($(GO) env GOMODCACHE)/cache/download,$$($(GO) env GOPROXY) \
	    GONOSUMDB=github.com/betcode-dev $(GO) mod tidy) && sed -i '\|^github.com/betcode-dev/betcode/|d' $$m/go.sum; done

clean:
	rm -rf $(BIN)

# make release's SBOMs; make test-deps installs it for shared/release/installtest.
$(TOOLS)/cyclonedx-gomod:
	@echo "installing cyclonedx-gomod $(CYCLONEDX_GOMOD_VERSION) (release SBOMs)"
	GOBIN=$(TOOLS) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

.PHONY: release verify-release
release: $(TOOLS)/cyclonedx-gomod ## reproducible archives, SBOMs, checksums.txt and its signature in dist/ (RELEASE_SIGNING_KEY=path, else a throwaway key; docs/releasing.md)
	$(GO) run ./shared/cmd/betcode-release build -out dist -version $(VERSION) -cyclonedx $(TOOLS)/cyclonedx-gomod \
	  $(if $(RELEASE_SIGNING_KEY),-signing-key $(RELEASE_SIGNING_KEY)) $(if $(RELEASE_TARGETS),-targets $(RELEASE_TARGETS))
	cp scripts/install.sh dist/install.sh

verify-release: ## check dist/: checksums.txt's signature (ALLOWED_SIGNERS=file, else the release key or a dev build's own), every SHA-256, an SBOM per archive
	$(GO) run ./shared/cmd/betcode-release verify -dir dist $(if $(ALLOWED_SIGNERS),-allowed-signers $(ALLOWED_SIGNERS))

include mk/proto.mk
include mk/web.mk
