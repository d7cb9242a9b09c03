# Every target sets up .venv on first use: torch's CPU build first (it lies on this machine's disk;
# any other pin downloads a multi-GB CUDA build), then the project with all extras, then the replay
# kernels compiled once (else the first processes of the tests or a grid each compile them).
PYTHON ?= python3
# Python caches bytecode even where the machine says not to (PYTHONDONTWRITEBYTECODE=1): the tests
# start hundreds of interpreters, and each pytest worker would rewrite every test module again.
export PYTHONDONTWRITEBYTECODE :=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench lint clean dataset docs

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install torch==2.13.0
	$(BIN)/python -m pip install -e ".[all]"
	$(BIN)/python -m dream_gym.envs.precompile
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dream-gym demo

lint: $(STAMP)
	$(BIN)/ruff check dream_gym agents tests benchmarks experiments recorded_worlds/recorded-v0/make_card.py recorded_worlds/recorded-v1/build.py
	$(BIN)/mypy dream_gym
	$(BIN)/lint-imports --no-cache

# The docs site (mkdocs.yml): any broken link, missing page or failing docstring import is an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# The whole suite, slow tests included (CI runs this), on two workers that take tests from each
# other's queue when theirs runs out (worksteal: else the slowest tests can end on one worker
# while the other idles). Lint and the docs build run beside it, their
# output kept until the tests end (run before them, they left a core idle for 20 s); the target
# fails if either part does.
CHECKS := $(VENV)/checks
test: $(STAMP)
	@{ $(MAKE) --no-print-directory -j 2 --output-sync=target lint docs > $(CHECKS).log 2>&1; \
	   echo $$? > $(CHECKS).status; } & \
	$(BIN)/python -m pytest -n 2 --dist worksteal -q --durations=15 --nbmake tests notebooks; tests=$$?; \
	wait; cat $(CHECKS).log; checks=$$(cat $(CHECKS).status); \
	echo "make test: tests exit $$tests, lint and docs exit $$checks"; \
	test $$tests -eq 0 && test $$checks -eq 0

# Fast tests only, for the edit-run loop: no test marked slow, no notebook (make test runs both).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -m "not slow" tests

# Grow (or resume) every world of dream-gym/recorded-v1, then write its dataset.json and card (~1 h on 2 cores).
dataset: $(STAMP)
	nice -n 5 $(BIN)/python recorded_worlds/recorded-v1/build.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.replay_speed
	$(BIN)/python -m benchmarks.vector_speed
	$(BIN)/python -m benchmarks.eval_speed
	$(BIN)/python -m benchmarks.isolation_overhead
	$(BIN)/python -m benchmarks.online_cost
	$(BIN)/python -m benchmarks.oracle_speed
	$(BIN)/python -m benchmarks.import_runs
	$(BIN)/python -m benchmarks.redact_speed

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
