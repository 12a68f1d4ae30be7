# Two set-up commands: `make demo` and `make test`. Both create .venv and install the project.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test bench-ingest readme-config db-stop clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/crossroads db start
	$(BIN)/crossroads ingest fixtures/corpus --tenant demo --prune
	$(BIN)/crossroads documents list --tenant demo

test: install
	$(BIN)/pytest

bench-ingest: install
	$(BIN)/python -m bench.ingest

readme-config: install
	$(BIN)/python -m bench.update_readme_config

db-stop:
	-$(BIN)/crossroads db stop

clean: db-stop
	rm -rf $(VENV) .crossroads .pytest_cache
