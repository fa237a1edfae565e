# mk/web.mk: the web app (web/) embedded into the Go binaries as shared/webui/dist.
# Included from the top-level Makefile.
#
# web         npm ci in web/ (pinned by package-lock.json), then type-check and build into
#             shared/webui/dist (checked in: the Go build needs no Node.js)
# web-check   rebuild, fail when the checked-in dist differs (the build is reproducible) or the
#             first load is over 150 KB of gzip'd JS+CSS (web/scripts/size.mjs); then the unit
#             tests of web/test (npm test: markdown sanitizing, diffs, highlighting)

WEB_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
WEB_DIST := shared/webui/dist

.PHONY: web web-check

web: ## build the web app (web/) into shared/webui/dist
	cd $(WEB_ROOT)/web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

web-check: web ## rebuild the web app; fail if shared/webui/dist differs from git or is over its size budget
	@cd $(WEB_ROOT) && git diff --exit-code --stat -- $(WEB_DIST) || { echo "web-check: shared/webui/dist is not the build of web/: run make web and commit it"; exit 1; }
	@cd $(WEB_ROOT) && out=$$(git status --porcelain --untracked-files=all -- $(WEB_DIST)); \
	  if [ -n "$$out" ]; then echo "$$out"; echo "web-check: shared/webui/dist has uncommitted files: run make web and commit it"; exit 1; fi
	cd $(WEB_ROOT)/web && node scripts/size.mjs
	cd $(WEB_ROOT)/web && npm test --silent
