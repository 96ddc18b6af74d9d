# The two commands of the README. Each creates the virtual environment and
# installs the project on first use (again whenever setup.cfg or setup.py
# changes), so they work from a fresh clone on a machine with Python 3.11+.
# `make run` installs the runtime only; `make test` adds the test tools
# (pytest, schemathesis, playwright, ...), each step with its own stamp file.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-fast install docs

$(BIN)/.installed: setup.cfg setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed, found " + sys.version.split()[0] + ": run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

$(BIN)/.installed-docs: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@

install: $(BIN)/.installed

.PHONY: cluster
## cluster: the whole service as a cluster of network namespaces on this machine (root),
## under load through the full fault schedule; prints the figures and, last,
## `cluster: events E, delivered D, lost L, stuck S, duplicates U, faults F` (docs/reliability.md).
## CLUSTER_ARGS passes options on: `make cluster CLUSTER_ARGS=--cpu-hog` runs it beside
## 2 spinning processes per CPU (stress-ng, installed then; a loaded machine);
## `python -m cluster --help` lists them.
CLUSTER_ARGS ?=
cluster: $(BIN)/.installed
	bash scripts/cluster-setup.sh $(if $(findstring --cpu-hog,$(CLUSTER_ARGS)),--cpu-hog)
	$(BIN)/python -m cluster $(CLUSTER_ARGS)

.PHONY: guides
## guides: docs/deploy.md, docs/upgrade.md and docs/integrate.md followed as written on a
## cluster of network namespaces (root; about 10 minutes): web hosts behind an nginx TLS
## balancer, workers, one scheduler, a Sentinel broker, a read replica, an app host, a
## rolling upgrade from an older commit and back. Prints each check and, last,
## `guides: checks passed: deploy.md N/N, integrate.md N/N, upgrade.md N/N`.
guides: $(BIN)/.installed
	bash scripts/cluster-setup.sh --guides
	$(BIN)/python -m cluster.guides

## run: the whole service on the embedded defaults (SQLite + file broker), no server needed.
## `webhooks dev` migrates too; PORT (default 5000) and WEBHOOKS_* variables pass through.
run: $(BIN)/.installed
	$(BIN)/webhooks db upgrade
	$(BIN)/webhooks dev

## test-packages: the Debian packages of the tests that would skip without them, installed
## when missing, as .ci/run does: chromium (the dashboard's browser tests), nodejs (the Node
## receiver of docs/receivers.md), nftables, faketime and iproute2 (the cluster's short run,
## the clock tests), tinyproxy (the egress-proxy tests). Needs root or
## passwordless sudo; otherwise the scripts say what is missing and those tests skip.
.PHONY: test-packages
test-packages:
	@bash scripts/install-browser.sh
	@bash scripts/install-node.sh
	@bash scripts/cluster-setup.sh
	@bash scripts/install-proxy.sh

## lint-imports: the layers of docs/architecture.md ("Layers"), as setup.cfg's import-linter
## contracts declare them; an import that climbs fails, its path named. A fraction of a second
## (no cache folder: --no-cache). tests/test_architecture.py counts circles and imports hidden
## in functions beside it.
LINT_IMPORTS = $(BIN)/lint-imports --no-cache

## test: the layers, then the whole test suite (needs the machine's PostgreSQL and Redis; see
## README). Three pytest-xdist workers on the 2 cores, each with its own test database and Redis
## db: most tests wait on processes, sockets and retries (two workers kept the cores 55 % busy;
## three ran the suite in 684 s against 750 s, README "How long the suite takes"). The files go
## to the workers in collection order (--no-loadscope-reorder), which tests/conftest.py's
## LONGEST_FIRST sorts longest first. `make test TEST_PACKAGES=` skips test-packages.
TEST_PACKAGES ?= test-packages
test: $(BIN)/.installed-test $(TEST_PACKAGES)
	$(LINT_IMPORTS)
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

## test-fast: the layers (lint-imports), then the tier that needs no server (SQLite, fake
## senders, local sockets); seconds.
## Bytecode is cached even under PYTHONDONTWRITEBYTECODE: without the cache each of the three
## pytest processes compiles the project and re-rewrites the asserts of every test module and
## of Hypothesis (a pytest plugin), about 1.5 s of CPU each. No schemathesis in this tier.
test-fast: $(BIN)/.installed-test
	$(LINT_IMPORTS)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 --tier fast -q -p no:schemathesis

## docs: the Python API reference, from the docstrings (Sphinx autodoc), in build/docs/html.
## -W turns every warning into an error (a docstring that does not render, a module that does
## not import); -E rebuilds from scratch, so no warning hides in an old build's cache.
docs: $(BIN)/.installed-docs
	$(BIN)/sphinx-build -W --keep-going -E -q -b html docs/reference build/docs/html
	@echo "the API reference: build/docs/html/index.html"
