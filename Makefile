# ilnrun — the two commands a newcomer needs: `make reproduce-figure1` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: install test test-kernels test-plugins lint reproduce-figure1 bench clean

install: $(STAMP)

# Re-install only when the package metadata changes (editable install: code edits need nothing).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: install
	MPLBACKEND=Agg $(BIN)/python -m pytest
	$(MAKE) --no-print-directory test-kernels

# The numeric tests again under two OpenBLAS kernels that every x86-64 CPU runs
# (docs/protocol.md §9.1): the golden values hold within their tolerance, and compiled and
# numpy code agree bit for bit, whatever kernel the CPU would pick.
KERNELS      ?= Nehalem Sandybridge
KERNEL_TESTS := tests/test_golden.py tests/test_compiled.py tests/test_compiled_random_features.py \
                tests/test_estimates_compiled.py tests/test_estimators.py
test-kernels: install
	@for k in $(KERNELS); do \
	  echo "OPENBLAS_CORETYPE=$$k: $(KERNEL_TESTS)"; \
	  OPENBLAS_CORETYPE=$$k MPLBACKEND=Agg $(BIN)/python -m pytest $(KERNEL_TESTS) || exit $$?; \
	done

# The plugin-contract tests (those that iterate over the learner, feature-map, dataset and loss
# registries) with a toy learner, map, dataset and loss registered for the whole run
# (tests/toy_plugins.py, docs/architecture.md §4): no test may assume the built-ins alone.
PLUGIN_TESTS := tests/test_contracts.py tests/test_features.py tests/test_engine_validation.py \
                tests/test_estimators_derived.py tests/test_roundtrip.py tests/test_architecture.py \
                tests/test_select_on.py tests/test_cli_list.py tests/test_primal.py \
                tests/test_worked_examples.py tests/test_toy_plugins.py tests/test_engine_jax.py \
                tests/test_compiled.py tests/test_compiled_random_features.py tests/test_losses.py
test-plugins: install
	ILNRUN_TOY_PLUGINS=1 MPLBACKEND=Agg $(BIN)/python -m pytest $(PLUGIN_TESTS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Prints its elapsed time (run + plot) at the end.
reproduce-figure1: install
	@t0=$$($(BIN)/python -c 'import time; print(time.time())'); \
	echo "$(BIN)/ilnrun run configs/figure1.yaml --jobs $(JOBS)"; \
	$(BIN)/ilnrun run configs/figure1.yaml --jobs $(JOBS) || exit $$?; \
	echo "MPLBACKEND=Agg $(BIN)/ilnrun plot results/figure1"; \
	MPLBACKEND=Agg $(BIN)/ilnrun plot results/figure1 || exit $$?; \
	$(BIN)/python -c 'import sys, time; print(f"reproduce-figure1: {time.time() - float(sys.argv[1]):.1f} s (run and plot, --jobs {sys.argv[2]})")' "$$t0" "$(JOBS)"

# Benchmarks (a few minutes; not part of `make test`): prints a table and writes
# experiments/performance/REPORT.md. Run it on an otherwise idle machine. Its last step,
# bench/gpu.py, measures the jax engine on a GPU where one is at hand (about 7 minutes more,
# recorded in experiments/performance/gpu.json) and else prints "no GPU: skipped".
# BENCH_AGAINST: the git revision whose code figure1 is also timed (default: the previous commit).
BENCH_AGAINST ?= HEAD~1
bench: install
	MPLBACKEND=Agg $(BIN)/python bench/run_bench.py --jobs $(JOBS) --against $(BENCH_AGAINST)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
