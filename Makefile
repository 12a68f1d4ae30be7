# Two set-up commands: `make demo` and `make test`. Both create .venv and install the project.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test test-unit eval eval-router eval-router-blind eval-answers eval-answers-blind eval-agentic bench-ingest bench-embed bench-search bench-partitions bench-graph bench-ppr bench-api bench-llm readme-config db-stop clean

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
	$(BIN)/crossroads levels set demo staff public,staff
	$(BIN)/crossroads graph build --tenant demo
	$(BIN)/crossroads search "What does ERR_2043 mean?" --tenant demo --groups public,staff --k 3
	$(BIN)/crossroads communities list --tenant demo --level staff
	@echo "--- one question per route (local, global, multihop) ---"
	$(BIN)/crossroads ask "What does error ERR_2043 mean in the Carrier Connector?" --tenant demo --groups public,staff
	$(BIN)/crossroads ask "What are the main recurring themes across all incident reviews?" --tenant demo --groups public,staff
	$(BIN)/crossroads ask "In which office does the lead of the team that owns the Payments Gateway work?" --tenant demo --groups public,staff

# Two pytest-xdist workers, each with its own embedded PostgreSQL (tests/conftest.py); `make test` hands out
# whole files (module fixtures build once); TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= 2

test: install
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test-unit: install
	$(BIN)/pytest -m unit -q -n $(TEST_WORKERS)

eval: install
	$(BIN)/python -m bench.eval_readme

eval-router: install
	$(BIN)/python -m bench.router_eval

eval-router-blind: install
	$(BIN)/python -m bench.router_blind
	$(BIN)/python -m bench.router_blind --set bench/router_blind2/questions.jsonl

eval-answers: install
	$(BIN)/python -m bench.answer_eval

eval-answers-blind: install
	$(BIN)/python -m bench.answer_eval --sets blind,blind_xl,blind_xl2,blind_mh,blind_mh2,blind3,blind4,blind5,blind6,blind7,blind8,blind9,blind10,blind11,blind12,blind13,unseen_xq_test,unseen_mh_test,unseen_xlmh_test

eval-agentic: install
	$(BIN)/python -m bench.multihop_agentic --graph

bench-ingest: install
	$(BIN)/python -m bench.ingest

bench-embed: install
	$(BIN)/python -m bench.embed $(ARGS)

bench-search: install
	$(BIN)/python -m bench.search

bench-partitions: install
	$(BIN)/python -m bench.partitions $(ARGS)

bench-graph: install
	$(BIN)/python -m bench.graph

bench-ppr: install
	$(BIN)/python -m bench.ppr

bench-api: install
	$(BIN)/python -m bench.api_load

bench-llm: install
	$(BIN)/python -m bench.llm_throughput

readme-config: install
	$(BIN)/python -m bench.update_readme_config

db-stop:
	-$(BIN)/crossroads db stop

clean: db-stop
	rm -rf $(VENV) .crossroads .pytest_cache
