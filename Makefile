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
.PHONY: help venv build test test-rust test-python test-fuzz fuzz fuzz-build demo bench \
	bench-spark bench-datastream jars lint fmt proto clean fuzz-campaign properties

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

test: test-rust test-python test-fuzz ## Everything CI runs: cargo test, pytest (Spark included), fuzz briefly

test-rust: ## Rust unit tests (no Python needed)
	cargo test

test-python: build ## pytest: parity, fixtures, Spark
	$(PY) -m pytest

# The long property-test runs (docs/hardening.md): EXAMPLES per format, in CHUNKS with seeds
# SEED, SEED+1, ... (at least one chunk per 5,000 examples), JOBS chunks at once; `make
# test` runs 300 per format.
EXAMPLES ?= 2000
SEED     ?= 1
CHUNKS   ?= 1
JOBS     ?= 1

properties: build ## Property tests, EXAMPLES per format (CHUNKS, JOBS, SEED); a table of what passed
	$(PY) tools/properties.py --examples $(EXAMPLES) --seed $(SEED) --chunks $(CHUNKS) \
		--jobs $(JOBS) $(FORMATS)

# Fuzzing (fuzz/, docs/hardening.md): cargo-fuzz on the nightly toolchain, installed into
# .tools/ on first use. Every target runs FUZZ_SECONDS from corpora that fuzz/seed.py builds
# in fuzz/corpus/ (git-ignored) and keeps what it finds there; a crash stops the run with
# its input in fuzz/artifacts/. Then fuzz/differential.py (atheris) feeds each format's
# corpus, and the typed target's, to both engines, which must agree.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(shell sed -n 's/^name = "\([a-z-]*\)"$$/\1/p' fuzz/Cargo.toml | grep -v -e fuzz -e harness)
# Bounded memory: libFuzzer fails a run whose RSS passes 2 GiB or that asks for more than
# 512 MiB in one allocation (inputs are at most 64 KiB).
FUZZ_FLAGS := -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 -timeout=20
CARGO_FUZZ := $(abspath .tools/bin/cargo-fuzz)
FUZZ := PATH="$(abspath .tools/bin):$$PATH" cargo +nightly fuzz

$(CARGO_FUZZ):
	rustup run nightly rustc --version >/dev/null 2>&1 || \
		rustup toolchain install nightly --profile minimal
	# --debug: a driver that only runs cargo builds in half the time, unoptimised.
	cargo install cargo-fuzz --locked --debug --quiet --root .tools

fuzz-build: $(CARGO_FUZZ) ## Build the fuzz targets (release, AddressSanitizer)
	cd fuzz && $(FUZZ) build

fuzz: fuzz-build build ## Run every fuzz target, then the differential one per format, FUZZ_SECONDS each
	$(PY) fuzz/seed.py
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		$(FUZZ) run $$target -- \
			-max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) -print_final_stats=1 || exit 1; \
	done
	mkdir -p fuzz/artifacts/differential
	for format in $(filter-out datahub-tuple,$(FUZZ_TARGETS)); do \
		$(PY) fuzz/differential.py $$format -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
			-rss_limit_mb=4096 -artifact_prefix=fuzz/artifacts/differential/$$format- \
			-print_final_stats=1 fuzz/corpus/$$format || exit 1; \
	done

# The long runs (docs/hardening.md): FUZZ_RUNS executions of each target (or of TARGETS),
# built without a sanitizer, several times faster than under ASan (a crash found is re-run
# under ASan by `cargo fuzz run <target> <artifact>`); each run's stats end its log in
# fuzz/campaign/ (git-ignored).
FUZZ_RUNS ?= 10000000
TARGETS ?= $(FUZZ_TARGETS)

fuzz-campaign: $(CARGO_FUZZ) build ## Long runs: FUZZ_RUNS executions of each fuzz target (or of TARGETS)
	$(PY) fuzz/seed.py
	mkdir -p fuzz/campaign
	cd fuzz && for target in $(TARGETS); do \
		$(FUZZ) run -s none --target-dir target-nosan $$target -- -runs=$(FUZZ_RUNS) \
			$(FUZZ_FLAGS) -print_final_stats=1 2>&1 | tee campaign/$$target.log | \
			grep -E '^(#[0-9]+ +(pulse|DONE)|stat::|==[0-9]+== ERROR)' ; \
		grep -q 'stat::number_of_executed_units' campaign/$$target.log || exit 1; \
		! grep -q 'ERROR: libFuzzer' campaign/$$target.log || exit 1; \
	done

test-fuzz: ## Every fuzz target briefly (10 s each), as CI runs them
	$(MAKE) fuzz FUZZ_SECONDS=10

demo: build ## Generate streams in every format, decode them on local Spark, show the tables and the throughput
	$(PY) -m cdc_decode.demo

BENCH_DATA := target/bench-data

bench: build ## Benchmarks on a release build: criterion (Rust), then native vs python in process
	@for f in $$($(PY) -c "import cdc_decode.generate as g; print(*g.FORMATS)"); do \
		test -f $(BENCH_DATA)/$$f/manifest.json || \
		$(VENV)/bin/cdc-decode generate $$f --messages 20000 --seed 1 --out $(BENCH_DATA)/$$f; \
	done
	test -f $(BENCH_DATA)/datastream-avro-500/manifest.json || \
		$(VENV)/bin/cdc-decode generate datastream-avro --messages 200 --seed 1 \
		--tables shop.order_items --rows-per-message 500 --out $(BENCH_DATA)/datastream-avro-500
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
	$(PY) benches/spark_race.py --rounds 5 --out docs/spark-race

# The Datastream tree race (docs/datastream.md): readers of the same generated bucket tree on
# disk at 5,000 and 50,000 files, Avro and JSON; writes docs/datastream-tree.md.
bench-datastream: build jars ## Datastream tree race: read_datastream vs spark-avro / spark.read.json, local[1]
	$(PY) benches/datastream_tree.py --out docs/datastream-tree.md

lint: $(STAMPS)/venv ## rustfmt check, clippy -D warnings, ruff
	cargo fmt --check
	cargo clippy --all-targets --all-features -- -D warnings
	$(VENV)/bin/ruff check python tests benches fuzz tools/properties.py
	$(VENV)/bin/ruff format --check python tests benches fuzz tools/properties.py

fmt: $(STAMPS)/venv ## Format Rust and Python sources in place
	cargo fmt
	$(VENV)/bin/ruff format .

proto: ## Rewrite python/cdc_decode/fallback/subscribe.desc from proto/subscribe.proto
	CDC_DECODE_WRITE_DESCRIPTOR=1 cargo test --lib shipped_descriptor

clean: ## Remove build outputs, caches and the venv
	cargo clean
	rm -rf fuzz/target fuzz/corpus fuzz/artifacts
	rm -rf $(VENV) python/cdc_decode/_native*.so .pytest_cache .ruff_cache .benchmarks \
		spark-warehouse metastore_db derby.log demo-output
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
