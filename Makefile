# The two commands a fresh machine needs (see README):
#   make serve   install into .venv, create the SQLite database, load the demo, serve on http://127.0.0.1:8000
#   make test    install the test dependencies, run the whole suite on SQLite and on PostgreSQL

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/anchorgpu

.PHONY: serve test test-sqlite test-postgres bench clean catalogs

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

# The translation catalogs, compiled from the committed .po files.
catalogs: $(VENV)/.installed
	$(BIN)/anchorgpu compilecatalogs

serve: $(VENV)/.installed catalogs
	$(BIN)/anchorgpu serve

test: test-sqlite test-postgres

test-sqlite: $(VENV)/.installed-test catalogs
	$(BIN)/pytest

test-postgres: $(VENV)/.installed-test catalogs
	DATABASE_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest

bench: $(VENV)/.installed-test
	$(BIN)/python bench/allocation.py
	$(BIN)/python bench/orders.py

clean:
	rm -rf $(VENV) var
