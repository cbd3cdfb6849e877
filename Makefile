# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo demo-full spark-example test test-fast lint bench install check-java clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tidekeep needs Python >= 3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,connect]'  # connect: the Spark Connect tests
	@touch $(STAMP)

install: $(STAMP)

check-java:
	@sh scripts/check-java.sh

demo: $(STAMP) check-java
	@bash examples/demo.sh

# the demo and the Spark Structured Streaming example, about a minute more
demo-full: $(STAMP) check-java
	@TIDEKEEP_DEMO_FULL=1 bash examples/demo.sh

spark-example: $(STAMP) check-java
	$(PY) examples/spark_streaming_retention.py

# WORKERS=N runs the tests in N processes (pytest-xdist; auto: one per core, 0: in this process).
# `make test` stays in one process unless asked (docs/testing.md, "In parallel", says why)
test: $(STAMP) check-java
	$(PY) -m pytest -q -n $(or $(WORKERS),0) $(PYTEST_ARGS)

# everything without Spark or a subprocess (markers applied by tests/conftest.py), one process per core
test-fast: $(STAMP)
	$(PY) -m pytest -q -n $(or $(WORKERS),auto) -m "not spark and not slow" $(PYTEST_ARGS)

# ruff, then mypy over src/tidekeep with the settings in pyproject.toml ([tool.mypy])
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports  # the layering contracts in .importlinter (docs/workspace.md, "The house")
	$(VENV)/bin/mypy

bench: $(STAMP) check-java
	$(PY) benchmarks/bench_streams.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info
