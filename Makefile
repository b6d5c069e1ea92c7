# Two entry points (see README): `make verify` runs the main job, `make test`
# runs the test suite. Each creates and fills .venv on its own.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify test lint crosshair clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Main job: check the spec's contracts with CrossHair, then verify stores against it.
verify: $(STAMP)
	$(BIN)/python -m auxspec.crosshair_check
	$(BIN)/auxspec verify

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check impl spec tests benchmarks fuzz
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
