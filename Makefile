# The two commands a fresh machine needs (see README):
#   make serve   install into .venv, create the SQLite database, load the demo, serve on http://127.0.0.1:8000
#                with the worker beside it (emails, quote expiry, access preparation); make serve PORT=8001
#   make test    install the test dependencies, run the whole suite on SQLite and on PostgreSQL

PYTHON ?= python3.11
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/anchorgpu
# anvil, the local Ethereum node of the chain-watcher tests, from npm into the git-ignored .tools/
# (another machine may set ANVIL_PACKAGE to its platform's @foundry-rs/anvil-* package).
TOOLS := .tools
ANVIL_VERSION := 1.7.1
ANVIL_PACKAGE ?= @foundry-rs/anvil-linux-amd64
ANVIL_STAMP := $(TOOLS)/.installed-anvil-$(ANVIL_VERSION)

.PHONY: serve test test-sqlite test-postgres lint bench clean catalogs anvil

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The shop with the planner's simulation engine (the ml extra); torch first, pinned (see below).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[ml]'
	touch $@

# torch first, pinned: this spelling installs the CPU build (any other may download several GB).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test,ml]'
	touch $@

# --save-exact keeps the pin in .tools/package.json, so a later npm install there (build.sh's solc) keeps it too.
$(ANVIL_STAMP):
	npm install --prefix $(TOOLS) --save-exact --no-audit --no-fund $(ANVIL_PACKAGE)@$(ANVIL_VERSION)
	touch $@

anvil: $(ANVIL_STAMP)

# The translation catalogs, compiled from the committed .po files.
catalogs: $(VENV)/.installed
	$(BIN)/anchorgpu compilecatalogs

serve: $(VENV)/.installed catalogs
	$(BIN)/anchorgpu serve --port $(PORT)

test: anvil test-sqlite test-postgres

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src/

test-sqlite: $(VENV)/.installed-test catalogs anvil
	$(BIN)/pytest

test-postgres: $(VENV)/.installed-test catalogs anvil
	DATABASE_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest

bench: $(VENV)/.installed-test anvil
	$(BIN)/python bench/allocation.py
	$(BIN)/python bench/orders.py
	$(BIN)/python bench/chain_watch.py
	$(BIN)/python bench/load.py

clean:
	rm -rf $(VENV) var $(TOOLS)
