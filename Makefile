# Two entry points (see README): `make verify` runs the main job, `make test`
# runs the test suite. Each creates and fills .venv on its own.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify test test-long test-all lint crosshair clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Main job: CrossHair checks the spec's own contracts, the vectors are checked
# against the spec (and their coverage of it), then the bundled store is
# verified against the spec.
verify: $(STAMP)
	$(BIN)/python -m auxspec.checks.crosshair
	$(BIN)/auxspec vectors --check
	$(BIN)/auxspec verify --max-time 60

# Both cores (pytest-xdist); a file's tests stay on one worker, in order (a doc's blocks share a namespace);
# the longest files first (tests/conftest.py).
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# What a contributor runs: everything but the long tier (README: its time and memory).
test: $(STAMP) lint
	@$(PYTEST) -m "not slow and not large_memory" --durations=5

# The long tier: per-port sweeps, mutation samples, CrossHair's teeth, builds, soaks, the 2.2 GB store.
test-long: $(STAMP)
	@$(PYTEST) -m "slow or large_memory" --durations=10

test-all: test test-long

lint: $(STAMP)
	@$(BIN)/ruff check --quiet impl spec tests benchmarks fuzz
	@$(BIN)/mypy
	@$(BIN)/lint-imports --no-logo

clean:
	rm -rf $(VENV)
