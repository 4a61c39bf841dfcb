# The two commands: `make run` and `make test`. Each sets up what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: run test lint setup sandbox-deps bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The llama extra compiles llama.cpp (minutes on 2 cores, once: pip caches the wheel); LLaVA is not needed.
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(BIN)/python -m pip install --quiet -e '.[dev,llama]'
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

run: $(STAMP) sandbox-deps
	$(BIN)/lle run --quick

test: $(STAMP) sandbox-deps
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/store_ingest.py

clean:
	rm -rf $(VENV) .lle .pytest_cache .mypy_cache .ruff_cache
