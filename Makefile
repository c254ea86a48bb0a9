# mevedel — see `make help'.
SHELL := bash
# rustup installs cargo here; a non-login shell (CI) may not have it on PATH.
export PATH := $(HOME)/.cargo/bin:$(PATH)
EMACS ?= emacs
CARGO ?= cargo
MODULE := mevedel-dyn.so
# The remote helper runs on other hosts: linked statically (no libc
# version to match there) for this machine's architecture, and named by
# it so a host's `uname -m` picks the file to ship.
HOST_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
REMOTE := mevedel-remote-$(shell uname -m)
BATCH := $(EMACS) -Q --batch -l scripts/load-path.el
ELS := $(wildcard lisp/*.el)

.PHONY: help deps module page test run bench lint clean screenshots

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 10

deps: ## Install Emacs 30, bubblewrap, gptel & co. when missing (idempotent)
	@bash scripts/deps.sh

module: ## Build the native module (cargo --release --locked) and install it
	$(CARGO) build --release --locked
	cp target/release/libmevedel_dyn.so $(MODULE).tmp$$$$ && mv -f $(MODULE).tmp$$$$ $(MODULE)
	cp target/release/mevedel-sandbox mevedel-sandbox.tmp$$$$ && mv -f mevedel-sandbox.tmp$$$$ mevedel-sandbox
	RUSTFLAGS='-C target-feature=+crt-static' $(CARGO) build --release --locked -p mevedel-remote --target $(HOST_TRIPLE)
	cp target/$(HOST_TRIPLE)/release/mevedel-remote $(REMOTE).tmp$$$$ && mv -f $(REMOTE).tmp$$$$ $(REMOTE)

page: shared-page/index.html ## Bundle the whiteboard page (Excalidraw from .deps) into shared-page/

shared-page/index.html: $(wildcard page/*)
	@[ -d .deps/shared/npm/node_modules/esbuild ] || { echo "The whiteboard page needs its npm packages: run make deps" >&2; exit 1; }
	node page/build.mjs .deps/shared/npm/node_modules shared-page

test: ## Run every test: cargo tests, ERT, end-to-end; ends with "N passed, N failed"
	@bash scripts/deps.sh screenshots
	@$(MAKE) --no-print-directory module page
	@bash scripts/test.sh

run: deps ## Start Emacs in M-x mevedel (offline demo model when no backend is set up)
	@$(MAKE) --no-print-directory module page
	@bash scripts/run.sh

bench: deps ## Run the benchmarks; prints BENCH lines
	@$(MAKE) --no-print-directory module page
	@bash scripts/bench.sh

screenshots: ## Draw the view's screenshots into docs/images (graphical Emacs under Xvfb)
	@bash scripts/deps.sh screenshots
	@$(MAKE) --no-print-directory module
	@bash scripts/screenshots.sh docs/images

lint: deps ## cargo fmt --check, clippy -D warnings, byte-compile -Werror, checkdoc, Lisp structure
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --locked --workspace --all-targets -- -D warnings
	$(BATCH) --eval '(setq byte-compile-error-on-warn t)' \
	  --eval '(setq byte-compile-dest-file-function (lambda (f) (concat (make-temp-file "mevedel-lint") ".elc")))' \
	  -f batch-byte-compile $(ELS)
	$(BATCH) -l scripts/checkdoc.el $(ELS)
	$(EMACS) -Q --batch -l scripts/lisp-structure.el lisp

clean: ## Remove build output (keeps .deps)
	$(CARGO) clean
	rm -f $(MODULE) mevedel-sandbox mevedel-remote-* lisp/*.elc test/*.elc
	rm -rf shared-page
