# mmspec — run everything from the checkout (see pyproject.toml for why nothing is
# installed). `make verify` and `make test` set themselves up into .venv on first use.

VENV ?= .venv
PYTHON := $(VENV)/bin/python
ADAPTER ?= reference
PROFILE ?= ci
# Modules are imported as top-level packages from the checkout root.
RUN := PYTHONPATH=$(CURDIR) $(PYTHON)

.PHONY: verify test lint typecheck list clean

# The stamp is newer than requirements.txt once the pinned versions are installed; an
# edit to requirements.txt re-runs the install.
$(VENV)/.installed: requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

.venv: $(VENV)/.installed

verify: $(VENV)/.installed
	$(RUN) -m properties verify --adapter $(ADAPTER) --profile $(PROFILE)

list: $(VENV)/.installed
	$(RUN) -m properties list

test: $(VENV)/.installed
	$(RUN) -m pytest -q
	$(MAKE) --no-print-directory typecheck lint

typecheck: $(VENV)/.installed
	$(RUN) -m mypy --strict

lint: $(VENV)/.installed
	$(RUN) -m ruff check .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# --- the torch adapter: the optional torch extra (the CPU wheel here; never torchvision) ---
.PHONY: torch verify-torch bench-torch

$(VENV)/.torch: $(VENV)/.installed pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[torch]'
	touch $@

torch: $(VENV)/.torch

verify-torch: $(VENV)/.torch
	$(RUN) -m properties verify --adapter adapters/torch --profile $(PROFILE)

bench-torch: $(VENV)/.torch
	$(RUN) benchmarks/splice_bench.py
