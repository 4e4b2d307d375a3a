# cdc-decode developer targets. `make test` is what CI runs (.ci/run).
# Everything is installed into .venv by `make venv`; stamp files make re-runs cheap.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMPS := $(VENV)/.stamps

# Spark workers must run the venv's Python, with pyarrow and cdc_decode installed.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
# pyo3's build finds the interpreter it links against here.
export PYO3_PYTHON := $(abspath $(PY))

RUST_SOURCES := Cargo.toml Cargo.lock build.rs $(wildcard proto/*.proto) \
	$(shell find rust -name '*.rs' 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help venv build test test-rust test-python demo bench bench-spark jars lint fmt proto clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(STAMPS)/venv ## Create .venv with the pinned tools (requirements-dev.txt)

$(STAMPS)/venv: requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	mkdir -p $(STAMPS) && touch $@

build: $(STAMPS)/build ## Build the Rust extension (release) and install cdc_decode into .venv

# `maturin develop` installs the package editable from python/ and puts the compiled
# cdc_decode/_native*.so beside its Python sources.
$(STAMPS)/build: $(STAMPS)/venv $(RUST_SOURCES) pyproject.toml
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet
	$(PY) -c "import cdc_decode._native"
	touch $@

test: test-rust test-python ## Everything CI runs: cargo test, then pytest (Spark included)

test-rust: ## Rust unit tests (no Python needed)
	cargo test

test-python: build ## pytest: parity, fixtures, Spark
	$(PY) -m pytest

demo: build ## Generate a DTS stream, decode it on local Spark, show events and the table
	$(PY) -m cdc_decode.demo

BENCH_DATA := target/bench-data

bench: build ## Benchmarks on a release build: criterion (Rust), then native vs python in process
	@for f in $$($(PY) -c "import cdc_decode.generate as g; print(*g.FORMATS)"); do \
		test -f $(BENCH_DATA)/$$f/manifest.json || \
		$(VENV)/bin/cdc-decode generate $$f --messages 20000 --seed 1 --out $(BENCH_DATA)/$$f; \
	done
	cargo bench --bench decode -- --warm-up-time 1 --measurement-time 5
	$(PY) -m pytest benches/ --benchmark-only -p no:cacheprovider -s -q

# Spark connectors the pyspark wheel does not ship (spark-avro, Kafka), fetched by Maven into
# the git-ignored .jars/; tools/spark-jars/pom.xml names them and says why their versions.
JARS := .jars

jars: $(JARS)/.stamp ## Fetch the Spark connector jars (spark-avro, Kafka) into .jars/ with Maven

$(JARS)/.stamp: tools/spark-jars/pom.xml
	mvn -q -B -f tools/spark-jars/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(abspath $(JARS)) -DexcludeTransitive=true
	touch $@

bench-spark: build jars ## The Spark race: native vs python vs plain Spark vs passthrough, local[1]
	$(PY) benches/spark_race.py --out docs/spark-race

lint: $(STAMPS)/venv ## rustfmt check, clippy -D warnings, ruff
	cargo fmt --check
	cargo clippy --all-targets --all-features -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches

fmt: $(STAMPS)/venv ## Format Rust and Python sources in place
	cargo fmt
	$(VENV)/bin/ruff format .

proto: ## Rewrite python/cdc_decode/fallback/subscribe.desc from proto/subscribe.proto
	CDC_DECODE_WRITE_DESCRIPTOR=1 cargo test --lib shipped_descriptor

clean: ## Remove build outputs, caches and the venv
	cargo clean
	rm -rf $(VENV) python/cdc_decode/_native*.so .pytest_cache .ruff_cache .benchmarks \
		spark-warehouse metastore_db derby.log demo-output
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
