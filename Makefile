# Two commands on a fresh clone: `make demo` runs the main job (`minitf quickstart`), `make test` runs the tests.
# Each sets up .venv itself, installing torch FIRST (pinned: on machines with a local CPU wheel this takes it
# from disk; an unpinned torch, even one pulled in by another package, would download a multi-GB CUDA build).

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
BIN := $(VENV)/bin

.PHONY: demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/minitf quickstart --overwrite

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) quickstart_models .pytest_cache
