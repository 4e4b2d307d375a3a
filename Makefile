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

VERSION      := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
DIST         := dist
WHEEL_NAME    = $(DIST)/cdc_decode-$(VERSION)-cp310-abi3-manylinux2014_$(1).manylinux_2_17_$(1).whl
WHEEL_X86    := $(call WHEEL_NAME,x86_64)
WHEEL_ARM    := $(call WHEEL_NAME,aarch64)
SDIST        := $(DIST)/cdc_decode-$(VERSION).tar.gz
PY_SOURCES   := $(shell find python -name '*.py' -o -name '*.desc' 2>/dev/null)
WHEEL_BUILD   = PATH="$(abspath $(VENV)/bin):$$PATH" CARGO_TARGET_DIR=$(abspath target/wheel) \
	$(VENV)/bin/maturin build --release --quiet --zig --compatibility manylinux2014 \
	--target $(1)-unknown-linux-gnu --out $(DIST)

# Every test run names its slowest tests, so a test that grows is seen where it grows.
PYTEST_REPORT := --durations=25

.DEFAULT_GOAL := help
.PHONY: help venv build test test-rust test-python wheel wheel-x86_64 wheel-aarch64-run bench-schemas \
	test-spark35 venv-spark35 test-fuzz fuzz fuzz-build fuzz-differential demo bench test-downloads test-delta-apply test-delta-services \
	bench-spark jars lint fmt proto clean fuzz-campaign properties jars-kafka kafka kafka-stop \
	jars-autocdc demo-stream demo-formats bench-stream venv-spark42 delta-jars test-delta test-spark42 bench-apply bench-sync \
	demo-delta bench-datastream bench-apply-check check-targets real-source jars-connect debezium \
	mariadb connect connect-stop test-long test-real-source \
	venv-spark41 iceberg-jars test-iceberg bench-iceberg spark35-jars test-spark35-tables

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(STAMPS)/venv ## Create .venv with the pinned tools (requirements-dev.txt)

$(STAMPS)/venv: requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	mkdir -p $(STAMPS) && touch $@

build: $(STAMPS)/build ## Build the Rust extension (release) and install cdc_decode into .venv

# One release build serves every environment: the portable x86_64 wheel's (below), which the
# cluster test ships and .venv-spark35 installs. Each other venv gets the checkout installed
# editable from that same build (maturin's PEP 660 build, its cargo target folder and
# options the wheel's: nothing is compiled again): python/ on its path, the compiled
# cdc_decode/_native*.so beside the Python sources, the `cdc-decode` command.
EDITABLE = PATH="$(abspath $(VENV)/bin):$$PATH" CARGO_TARGET_DIR=$(abspath target/wheel) \
	MATURIN_PEP517_ARGS="--zig --compatibility manylinux2014 --target x86_64-unknown-linux-gnu" \
	$(1)/bin/python -m pip install --quiet --no-build-isolation --no-deps -e .

$(STAMPS)/build: $(STAMPS)/venv $(WHEEL_X86)
	$(call EDITABLE,$(VENV))
	$(PY) -c "import cdc_decode._native"
	touch $@

# `make test` runs its steps with tools/steps.py, which prints a timestamped line as each
# step starts and ends and a table of them at the end (docs/development.md, "CI"). Phases
# run one after another; the lanes of a phase (split by |) side by side, so that work
# waiting on sockets, disks and other processes (real databases, Kafka Connect, brokers,
# downloads) runs beside work that needs the CPU. The downloads run beside the builds the
# suites need (and cargo test). Each parallel suite gets its own pytest --basetemp.
# The lanes as measured from a fresh clone (docs/development.md): lane 1 ended 4 minutes before
# lane 2 when the differential fuzz target (97 s) ran at the end of lane 2.
TEST_LANE_1 := test-python test-delta-apply test-fuzz
TEST_LANE_2 := test-delta-services test-iceberg test-spark35-tables test-spark42 test-spark35
TEST_PHASES := \
	"check-targets venv" \
	"build test-rust | test-downloads" \
	"venv-spark42 venv-spark41 venv-spark35" \
	"$(TEST_LANE_1) | $(TEST_LANE_2)"

test: ## Everything CI runs: cargo test, pytest (Spark 4.3, Delta and Spark 4.2, Iceberg and Spark 4.1, Spark 3.5), differential fuzzing briefly; timed steps, two lanes
	+$(PYTHON) tools/steps.py --make "$(MAKE)" $(TEST_PHASES)


# Every target the docs name must work from a fresh clone on its own: dry runs of each in a
# copy of the checkout without the ignored folders, every folder its recipe and scripts use
# made by a recipe before (docs/development.md, "Targets work from a fresh clone").
check-targets: ## Every documented target declares what it uses (dry runs in a fresh copy; seconds)
	$(PYTHON) tools/check_targets.py

test-rust: ## Rust unit tests (no Python needed)
	cargo test

# tests/test_cluster.py ships the manylinux2014 x86_64 wheel to a standalone cluster's
# executors (a venv of that wheel and pyarrow only).
# The streaming tests (tests/test_streaming.py) start a Kafka broker from .jars-kafka/ and
# read it with Spark's Kafka connector from .jars/; tests/test_autocdc.py runs spark-pipelines
# with the in-memory row-level catalog from .jars-autocdc/.
test-python: build jars jars-kafka jars-autocdc $(WHEEL_X86) ## pytest: parity, fixtures, Spark (local, cluster, Connect), Kafka, pipelines
	CDC_DECODE_WHEEL=$(abspath $(WHEEL_X86)) $(PY) -m pytest -m "not long" $(PYTEST_REPORT)

# Portable wheels (docs/deploy.md): abi3 (any CPython >= 3.10), manylinux2014 (glibc 2.17:
# Amazon Linux 2, Debian 10+, RHEL/CentOS 7+), for x86_64 and aarch64 (Graviton, Ampere),
# cross-built with zig as linker and C compiler; their own cargo target folder, so they
# do not rebuild what `make build` compiled. tools/check_wheel.py checks tags, symbols,
# libraries and the dependencies of each.
$(STAMPS)/wheel-tools: requirements-wheel.txt $(STAMPS)/venv
	$(PY) -m pip install --quiet -r requirements-wheel.txt
	rustup target add x86_64-unknown-linux-gnu
	touch $@

$(WHEEL_X86): $(STAMPS)/wheel-tools $(RUST_SOURCES) pyproject.toml $(PY_SOURCES)
	$(call WHEEL_BUILD,x86_64)
	$(PY) tools/check_wheel.py $@

$(WHEEL_ARM): $(STAMPS)/wheel-tools $(RUST_SOURCES) pyproject.toml $(PY_SOURCES)
	rustup target add aarch64-unknown-linux-gnu
	$(call WHEEL_BUILD,aarch64)
	$(PY) tools/check_wheel.py $@

$(SDIST): $(STAMPS)/venv $(RUST_SOURCES) pyproject.toml $(PY_SOURCES)
	$(VENV)/bin/maturin sdist --out $(DIST)

wheel: $(WHEEL_X86) $(WHEEL_ARM) $(SDIST) ## manylinux2014 abi3 wheels (x86_64, aarch64) and the sdist into dist/, checked
	$(PY) tools/check_wheel.py $(WHEEL_X86) $(WHEEL_ARM)
	tar tzf $(SDIST) | grep -q 'python/cdc_decode/fallback/subscribe.desc'
	$(MAKE) wheel-aarch64-run

# The aarch64 wheel on an emulated aarch64 (qemu-user, Debian 12's arm64 Python 3.11 and
# pyarrow's aarch64 wheel): every format's stream decodes to the x86_64 engine's batches.
wheel-aarch64-run: $(WHEEL_ARM) build ## Run the aarch64 wheel under qemu-user against the x86_64 results
	tools/aarch64/check.sh $(WHEEL_ARM) target/aarch64-check $(abspath $(PY))

wheel-x86_64: $(WHEEL_X86) ## Only the x86_64 wheel (what the cluster test ships)

# pyspark 3.5 (the LTS most platforms run) with pyarrow<20 and numpy<2, in .venv-spark35
# (requirements-spark35.txt); cdc_decode comes from the manylinux2014 wheel, so this also
# tests that wheel installed. The Spark decode and accounting tests run there;
# tests/support/spark35.py gives them pyspark 4's DataFrame.toArrow and
# createDataFrame(pyarrow.Table); pyspark 3.5's own distutils warning and the sockets its
# collect leaves open (ResourceWarning) are not errors.
VENV35 := .venv-spark35
PY35   := $(VENV35)/bin/python

venv-spark35: $(VENV35)/.stamp ## Create .venv-spark35 (pyspark 3.5, requirements-spark35.txt)

$(VENV35)/.stamp: requirements-spark35.txt
	test -x $(PY35) || $(PYTHON) -m venv $(VENV35)
	$(PY35) -m pip install --quiet --upgrade pip
	$(PY35) -m pip install --quiet -r requirements-spark35.txt
	touch $@

# check-targets: test-spark35 needs no .jars, .jars-kafka: tests/conftest.py loads .jars on Spark 4 only, and these tests ask for no broker
# The wheel installed once per build of it: test-spark35 and test-spark35-tables run in
# different lanes of make test, and a reinstall under a running suite would pull its
# modules away.
$(VENV35)/.wheel: $(VENV35)/.stamp $(WHEEL_X86)
	$(PY35) -m pip install --quiet --no-deps --force-reinstall $(WHEEL_X86)
	touch $@

test-spark35: $(VENV35)/.wheel ## The Spark decode and accounting tests on pyspark 3.5
	PYSPARK_PYTHON=$(abspath $(PY35)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY35)) \
		PYTHONPATH=tests $(PY35) -m pytest -p support.spark35 -q -m spark $(PYTEST_REPORT) \
		-W "ignore:distutils Version classes are deprecated:DeprecationWarning" \
		-W "ignore::ResourceWarning" \
		tests/test_spark.py tests/test_accounting.py

# The table step on pyspark 3.5 (docs/deploy.md, "What runs where"): Delta 3.3.2 and
# Iceberg 1.10.1 (Scala 2.12 jars, tools/spark35-jars/pom.xml) with Spark 3.5's Kafka
# source, in .venv-spark35 with the manylinux2014 wheel installed, as test-spark35 has it.
# The Delta apply rules, whole-database syncs equal to the source (three formats: a typed
# and an untyped one, and DataHub's unsigned bigints; make test-delta-apply syncs all six
# on Spark 4, and all six pass here too), a Kafka sync_stream
# whose driver is SIGKILLed and restarted, decode_stream's multi-part state across
# micro-batches, the Iceberg ground truth of two formats and what Spark 3.5's Iceberg
# runtimes cannot do (replay markers in a SQL MERGE's snapshot) refused.
DELTA35_JARS   := .jars-delta35
ICEBERG35_JARS := .jars-iceberg35
SPARK35_JARS   := .jars-spark35
# The rules on Spark 3.5: one case of each rule whose SQL or plan differs by version
# (partial images, a tombstone after two deletes, key changes, both SCD types, generic and
# typed metadata, replay markers, the one-task fold, the broadcast source of a MERGE that
# writes deletion vectors, the table's state computed ahead, quoting, DDL, conversions
# under ANSI off); the other cases run on 4.2.
RULES35 := \
	"test_a_partial_update_before_its_older_insert[2]" \
	test_late_partial_images_column_by_column \
	"test_a_tombstone_keeps_only_what_followed_the_delete_before_it[True]" \
	"test_metadata_columns_are_the_newest_change_s[1-True]" \
	"test_a_key_change_with_minimal_images_keeps_the_row[2]" \
	"test_a_key_change_split_into_a_delete_and_a_create[True]" \
	test_the_replay_markers_come_from_the_checksum_without_a_job \
	test_a_small_batch_folds_in_one_task_without_a_shuffle \
	test_a_merge_that_writes_deletion_vectors_broadcasts_its_source \
	test_the_tables_state_is_computed_ahead_in_a_thread \
	"test_equal_sequences_an_upsert_wins_over_a_delete[True]" \
	test_column_names_with_dots_backquotes_and_spaces \
	test_renamed_or_dropped_columns_in_ddl \
	test_values_that_do_not_convert_are_counted_not_fatal \
	test_sequence_by_integers_and_timestamps \
	test_a_table_of_the_older_layout_is_brought_up_to_date \
	test_stored_key_rows_of_many_composite_keys
SPARK35_DELTA := $(foreach t,$(RULES35),tests/delta/test_apply_rules.py::$(t)) \
	"tests/delta/test_sync.py::test_the_default_database_syncs_equal_to_the_source[tencent-dts]" \
	"tests/delta/test_sync.py::test_the_default_database_syncs_equal_to_the_source[datahub-blob]" \
	"tests/delta/test_sync.py::test_the_default_database_syncs_equal_to_the_source[debezium-json]" \
	tests/delta/test_sync.py::test_sync_stream_holds_multi_part_sets_cut_by_a_micro_batch \
	tests/delta/test_sync.py::test_every_way_a_change_misses_its_table_is_counted \
	tests/delta/test_apply.py::test_a_timestamp_ntz_column_added_to_a_table_made_without_one \
	tests/delta/test_apply.py::test_int_to_bigint_widens_on_delta_4_and_is_refused_on_delta_3
SPARK35_ICEBERG := \
	tests/iceberg/test_apply.py::test_a_table_bucketed_by_its_key_is_merged_where_its_rows_are_read \
	"tests/iceberg/test_apply.py::test_every_format_applied_equals_the_source[debezium-json-None]" \
	"tests/iceberg/test_apply.py::test_every_format_applied_equals_the_source[datahub-blob-None]" \
	tests/iceberg/test_apply.py::test_on_spark_3_replay_markers_are_refused_and_counts_come_from_the_snapshot
# One pytest per table format: each suite's session is its own SparkContext.
PYTEST35 = PYSPARK_PYTHON=$(abspath $(PY35)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY35)) \
	PYTHONPATH=tests $(PY35) -m pytest -p support.spark35 -q -p no:cacheprovider \
	$(PYTEST_REPORT) -o addopts="-ra --strict-markers --strict-config" \
	-W "ignore:distutils Version classes are deprecated:DeprecationWarning" \
	-W "ignore::ResourceWarning"

# check-targets: bench needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: bench-apply needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: bench-apply-check needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: bench-iceberg needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: bench-stream needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: bench-sync needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-delta needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-delta-apply needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-delta-services needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-iceberg needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-long needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-real-source needs no .jars-spark35: tests/support/delta.py and tests/support/iceberg.py pick it on pyspark 3 only
# check-targets: test-spark35-tables needs no .debezium, .jars-autocdc, .jars-connect: it runs only the tests $(SPARK35_DELTA) and $(SPARK35_ICEBERG) name, none of the real-source or AutoCDC ones
# check-targets: test-spark35-tables needs no .jars, .jars-delta: on pyspark 3 tests/support/delta.py picks .jars-delta35 and .jars-spark35, and tests/conftest.py loads .jars on Spark 4 only
spark35-jars: $(SPARK35_JARS)/.stamp ## Fetch Delta 3.3.2, Iceberg 1.10.1 and Spark 3.5's Kafka source (Scala 2.12) with Maven

$(SPARK35_JARS)/.stamp: tools/spark35-jars/pom.xml
	mvn -q -B -f tools/spark35-jars/pom.xml dependency:copy-dependencies -DexcludeTransitive=true \
		-DincludeGroupIds=io.delta -DoutputDirectory=$(abspath $(DELTA35_JARS))
	mvn -q -B -f tools/spark35-jars/pom.xml dependency:copy-dependencies -DexcludeTransitive=true \
		-DincludeGroupIds=org.apache.iceberg -DoutputDirectory=$(abspath $(ICEBERG35_JARS))
	mvn -q -B -f tools/spark35-jars/pom.xml dependency:copy-dependencies -DexcludeTransitive=true \
		-DexcludeGroupIds=io.delta,org.apache.iceberg -DoutputDirectory=$(abspath $(SPARK35_JARS))
	touch $@

test-spark35-tables: $(VENV35)/.wheel spark35-jars jars-kafka iceberg-jars ## The table step on pyspark 3.5 with Delta 3.3 and Iceberg 1.10
	$(PYTEST35) $(SPARK35_DELTA)
	$(PYTEST35) $(SPARK35_ICEBERG)

# Delta Lake runs on Spark 4.2, not on the 4.3 of .venv: a second environment,
# .venv-spark42 (requirements-spark42.txt), with cdc_decode installed editable from this
# checkout installed editable from the release build of `make build` (seconds), and
# the Delta jars from tools/delta-jars/pom.xml in .jars-delta/.
VENV42   := .venv-spark42
PY42     := $(VENV42)/bin/python
STAMPS42 := $(VENV42)/.stamps
DELTA_JARS := .jars-delta

venv-spark42: $(STAMPS42)/build ## Create .venv-spark42: pyspark 4.2 + Delta 4.4, cdc_decode installed

$(STAMPS42)/venv: requirements-spark42.txt
	test -x $(PY42) || $(PYTHON) -m venv $(VENV42)
	$(PY42) -m pip install --quiet --upgrade pip
	$(PY42) -m pip install --quiet -r requirements-spark42.txt
	mkdir -p $(STAMPS42) && touch $@

$(STAMPS42)/build: $(STAMPS42)/venv $(STAMPS)/build
	# The same abi3 build as .venv's, installed editable: no recompile.
	$(call EDITABLE,$(VENV42))
	$(PY42) -c "import cdc_decode._native, delta"
	touch $@

delta-jars: $(DELTA_JARS)/.stamp ## Fetch the Delta Lake 4.4.0 jars into .jars-delta/ with Maven

$(DELTA_JARS)/.stamp: tools/delta-jars/pom.xml
	mvn -q -B -f tools/delta-jars/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(abspath $(DELTA_JARS)) -DexcludeTransitive=true
	touch $@

# tests/delta/ needs .venv-spark42; the main pytest run ignores it (pyproject addopts).
# tests/delta/test_stream_apply.py streams from a Kafka broker (.jars-kafka/) through Spark's
# Kafka source (.jars/, its spark-avro left off the session) into Delta.
# tests/delta/test_real_source.py runs a real PostgreSQL and MariaDB with Debezium in Kafka
# Connect (make real-source): here both databases through a killed Kafka Connect; the tests
# marked `long` (both through a killed Spark driver, each database's Connect kill alone) are
# make test-real-source's.
# check-targets: test-delta needs no .jars-iceberg, .jars-iceberg-rest: tests/support/stream_apply.py opens an Iceberg session only with --iceberg, which tests/delta never passes
test-delta: test-delta-apply test-delta-services ## pytest tests/delta on .venv-spark42: apply_changes on real Delta tables, streamed from Kafka and from real databases through Debezium

# tests/delta in two runs, so that make test can put them in two lanes: the rules of one
# call (tests/delta/test_apply.py, test_apply_rules.py), and the rest: the syncs,
# concurrent writers and the tests that wait on brokers, real databases, Kafka Connect and
# driver processes.
DELTA_RULES := tests/delta/test_apply.py tests/delta/test_apply_rules.py
DELTA_PYTEST = PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
	$(PY42) -m pytest -p no:cacheprovider -m "not long" $(PYTEST_REPORT) \
	-o addopts="-ra --strict-markers --strict-config"

# check-targets: test-delta-apply needs no .jars-iceberg, .jars-iceberg-rest: tests/support/stream_apply.py opens an Iceberg session only with --iceberg, which tests/delta never passes
# check-targets: test-delta-services needs no .jars-iceberg, .jars-iceberg-rest: tests/support/stream_apply.py opens an Iceberg session only with --iceberg, which tests/delta never passes
test-delta-apply: venv-spark42 delta-jars jars jars-kafka real-source ## tests/delta's rules of one call: every format's ground truth, SCD2, the rules (Delta 4.4, Spark 4.2)
	$(DELTA_PYTEST) $(DELTA_RULES)

test-delta-services: venv-spark42 delta-jars jars jars-kafka real-source ## tests/delta's other tests: syncs, concurrent writers, brokers, real databases (PostgreSQL, MariaDB, Kafka Connect), killed drivers, examples
	$(DELTA_PYTEST) tests/delta $(foreach f,$(DELTA_RULES),--ignore=$(f))

test-real-source: venv-spark42 delta-jars jars jars-kafka real-source ## The long real-database runs: Kafka Connect SIGKILLed and restarted for each database alone, both through a SIGKILLed Spark driver
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) -m pytest tests/delta/test_real_source.py -p no:cacheprovider -m long $(PYTEST_REPORT) \
		-o addopts="-ra --strict-markers --strict-config"

# Everything make test leaves out (the tests marked `long`): the other formats' ground
# truth, SCD2 histories and syncs, the real databases' runs through a killed driver and
# each database's Kafka Connect kill alone, and the examples that fetch their jars from
# Maven Central.
# check-targets: test-long needs no .jars-iceberg, .jars-iceberg-rest: tests/support/stream_apply.py opens an Iceberg session only with --iceberg, which tests/delta never passes
test-long: build venv-spark42 delta-jars jars jars-kafka jars-autocdc real-source ## The tests make test leaves out (every format's ground truth and sync, real databases through kills, Maven Central)
	$(PY) -m pytest -m long $(PYTEST_REPORT)
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) -m pytest tests/delta -p no:cacheprovider -m long $(PYTEST_REPORT) \
		-o addopts="-ra --strict-markers --strict-config"

demo-delta: venv-spark42 delta-jars ## A DTS stream decoded on Spark 4.2, applied to Delta tables (SCD1 + SCD2), checked
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) examples/apply_delta.py --jars $(DELTA_JARS)

# Apache Iceberg's Spark runtimes stop at Spark 4.1 (none loads on 4.2 or 4.3): a third
# environment, .venv-spark41 (requirements-spark41.txt), cdc_decode installed editable as
# in .venv-spark42; the Iceberg runtime and Spark 4.1's Kafka source from
# tools/iceberg-jars/pom.xml in .jars-iceberg/, and an Iceberg REST catalog server for the
# tests (tools/iceberg-rest/: the classes of the apache/iceberg-rest-fixture image, run as
# a plain java process on loopback) in .jars-iceberg-rest/.
VENV41   := .venv-spark41
PY41     := $(VENV41)/bin/python
STAMPS41 := $(VENV41)/.stamps
ICEBERG_JARS      := .jars-iceberg
ICEBERG_REST_JARS := .jars-iceberg-rest

venv-spark41: $(STAMPS41)/build ## Create .venv-spark41: pyspark 4.1 (Apache Iceberg's newest Spark), cdc_decode installed

$(STAMPS41)/venv: requirements-spark41.txt
	test -x $(PY41) || $(PYTHON) -m venv $(VENV41)
	$(PY41) -m pip install --quiet --upgrade pip
	$(PY41) -m pip install --quiet -r requirements-spark41.txt
	mkdir -p $(STAMPS41) && touch $@

$(STAMPS41)/build: $(STAMPS41)/venv $(STAMPS)/build
	# The same abi3 build as .venv's, installed editable: no recompile.
	$(call EDITABLE,$(VENV41))
	$(PY41) -c "import cdc_decode._native, pyspark"
	touch $@

iceberg-jars: $(ICEBERG_JARS)/.stamp $(ICEBERG_REST_JARS)/.stamp ## Fetch Iceberg's Spark 4.1 runtime (.jars-iceberg/) and a REST catalog server (.jars-iceberg-rest/) with Maven

$(ICEBERG_JARS)/.stamp: tools/iceberg-jars/pom.xml
	rm -rf $(ICEBERG_JARS)
	mvn -q -B -f tools/iceberg-jars/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(abspath $(ICEBERG_JARS)) -DexcludeTransitive=true
	touch $@

$(ICEBERG_REST_JARS)/.stamp: tools/iceberg-rest/pom.xml
	rm -rf $(ICEBERG_REST_JARS)
	mvn -q -B -f tools/iceberg-rest/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(abspath $(ICEBERG_REST_JARS))
	touch $@

# tests/iceberg/ needs .venv-spark41; the main pytest run ignores it (pyproject addopts).
# The tests write to a Hadoop catalog in a temporary folder and to a REST catalog server
# they start (and stop by its PID); the streaming test reads from the Kafka broker of
# tests/support/kafka.py (.jars-kafka) with Spark 4.1's Kafka source (.jars-iceberg).
# check-targets: test-iceberg needs no .jars: tests/iceberg asks not for tests/conftest.py's Spark 4.3 session
# check-targets: test-iceberg needs no .jars-delta: tests/support/stream_apply.py opens a Delta session only without --iceberg, which tests/iceberg always passes
test-iceberg: venv-spark41 iceberg-jars jars-kafka ## pytest tests/iceberg on .venv-spark41: Iceberg tables in a Hadoop and a REST catalog
	PYSPARK_PYTHON=$(abspath $(PY41)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY41)) \
		$(PY41) -m pytest tests/iceberg -p no:cacheprovider $(PYTEST_REPORT) \
		-o addopts="-ra --strict-markers --strict-config"

# The Spark decode and accounting tests on pyspark 4.2 too (.venv-spark42, shared with
# the Delta tests): with test-python (4.3) and test-spark35, the versions platforms run.
# check-targets: test-spark42 needs no .jars-kafka: these tests ask for no broker
test-spark42: venv-spark42 jars ## The Spark decode and accounting tests on pyspark 4.2
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) -m pytest -q -m spark -p no:cacheprovider $(PYTEST_REPORT) \
		-o addopts="-ra --strict-markers --strict-config" \
		tests/test_spark.py tests/test_accounting.py

# What the test suites download (pip environments, Maven jars, MariaDB from Debian's
# packages), in one step of `make test` beside the builds.
test-downloads: $(STAMPS42)/venv $(STAMPS41)/venv $(VENV35)/.stamp jars jars-kafka jars-autocdc \
	delta-jars iceberg-jars spark35-jars real-source

# The workload users have (docs/apply.md, "Cost"): tables of 2,000,000 and 10,000,000 rows,
# micro-batches touching 0.1 % and 1 % of the keys, uniform and recent keys; apply_changes
# against row_number() + MERGE on a default table and on one with deletion vectors, every
# table checked against its reference. Then the older case (every key in every batch) as a
# regression row. Hours on 2 cores; BENCH_APPLY_ARGS="--rows 200000 --batches 5" for a
# short run of one scenario.
BENCH_APPLY_ARGS ?=

bench-apply: venv-spark42 delta-jars jars ## apply_changes vs row_number() + MERGE: big tables, small batches; then every key per batch
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) benches/apply_workload.py $(BENCH_APPLY_ARGS)
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) benches/apply_bench.py

# check-targets: bench-iceberg needs no .jars, .jars-delta, .jars-kafka: benches/iceberg_apply.py takes the workload of apply_workload.py (whose Delta session it never opens) and starts no broker
bench-iceberg: venv-spark41 iceberg-jars ## apply_changes vs row_number() + MERGE INTO on Iceberg tables (merge-on-read), Spark 4.1
	PYSPARK_PYTHON=$(abspath $(PY41)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY41)) \
		$(PY41) benches/iceberg_apply.py $(BENCH_ICEBERG_ARGS)

bench-sync: venv-spark42 delta-jars jars ## sync of a 100-table stream vs the loop over tables (decode tables= + apply_changes each) and the floor (row_number() + MERGE each), local[2]
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) benches/sync_bench.py $(BENCH_SYNC_ARGS)

# The ground truth at scale (docs/apply.md, "Checked at 100,000 changes per format"): every
# format's generated stream, 100,000 row changes, decoded on Spark, applied in 4 batches
# (shuffled, late duplicates), each Delta table equal to the source, one SCD2 history equal
# to the change log. Long (about an hour on 2 cores); `make bench` ends with it.
# APPLY_CHECK_ARGS="--changes 5000 --formats tencent-dts" for a short run.
APPLY_CHECK_ARGS ?=

bench-apply-check: venv-spark42 delta-jars jars ## Every format, 100,000 changes, decoded + applied to Delta, equal to the source
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) benches/apply_check.py --cores 2 $(APPLY_CHECK_ARGS)

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

fuzz: fuzz-build fuzz-differential ## The differential target per format, then every fuzz target, FUZZ_SECONDS each
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		$(FUZZ) run $$target -- \
			-max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) -print_final_stats=1 || exit 1; \
	done

# The differential target (atheris, in .venv) needs only the release extension: no
# nightly toolchain, no sanitizer build.
fuzz-differential: build ## The differential target per format and typed: both engines on each input, FUZZ_SECONDS each
	$(PY) fuzz/seed.py
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

test-fuzz: ## The differential fuzz target per format briefly (10 s each), as CI runs it
	$(MAKE) fuzz-differential FUZZ_SECONDS=10

demo: build venv-spark42 delta-jars jars jars-kafka ## Whole databases on a local broker synced into Delta tables (cdc-decode sync), each checked equal to the source
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) -m cdc_decode.demo --jars $(DELTA_JARS) --jars $(JARS) --kafka-jars $(KAFKA_JARS)

demo-formats: build ## Streams in every format decoded on local Spark 4.3, tables built in Spark SQL, throughput
	$(PY) -m cdc_decode.demo_formats

BENCH_DATA := target/bench-data

bench: build ## Benchmarks on a release build: criterion (Rust), native vs python in process, the apply check
	@for f in $$($(PY) -c "import cdc_decode.generate as g; print(*g.FORMATS)"); do \
		test -f $(BENCH_DATA)/$$f/manifest.json || \
		$(VENV)/bin/cdc-decode generate $$f --messages 20000 --seed 1 --out $(BENCH_DATA)/$$f; \
	done
	test -f $(BENCH_DATA)/datastream-avro-500/manifest.json || \
		$(VENV)/bin/cdc-decode generate datastream-avro --messages 200 --seed 1 \
		--tables shop.order_items --rows-per-message 500 --out $(BENCH_DATA)/datastream-avro-500
	cargo bench --bench decode -- --warm-up-time 1 --measurement-time 5
	$(PY) -m pytest benches/ --benchmark-only -p no:cacheprovider -s -q
	$(MAKE) --no-print-directory bench-apply
	$(MAKE) --no-print-directory bench-apply-check

# Spark connectors the pyspark wheel does not ship (spark-avro, Kafka), fetched by Maven into
# the git-ignored .jars/; tools/spark-jars/pom.xml names them and says why their versions.
JARS := .jars

jars: $(JARS)/.stamp ## Fetch the Spark connector jars (spark-avro, Kafka) into .jars/ with Maven

$(JARS)/.stamp: tools/spark-jars/pom.xml
	mvn -q -B -f tools/spark-jars/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(abspath $(JARS)) -DexcludeTransitive=true
	touch $@

# An Apache Kafka broker (KRaft, one node, no Docker) for the streaming tests and demo:
# tools/kafka-broker/pom.xml names it; Maven copies it and its runtime jars into .jars-kafka/.
KAFKA_JARS := .jars-kafka

jars-kafka: $(KAFKA_JARS)/.stamp ## Fetch the Kafka broker's jars into .jars-kafka/ with Maven

$(KAFKA_JARS)/.stamp: tools/kafka-broker/pom.xml
	rm -rf $(KAFKA_JARS)
	mvn -q -B -f tools/kafka-broker/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(abspath $(KAFKA_JARS))
	touch $@

# The broker module imports only the standard library: run by its path, it needs no build.
kafka: jars-kafka ## Start a Kafka broker on a free loopback port and print its address
	$(PYTHON) python/cdc_decode/_kafka_broker.py start --jars $(KAFKA_JARS) --state .kafka/broker.json

# check-targets: kafka-stop needs no .jars-kafka: only `start` reads the broker's jars
kafka-stop: ## Stop the broker `make kafka` started (by its PID)
	$(PYTHON) python/cdc_decode/_kafka_broker.py stop --state .kafka/broker.json

# A real database and a real Debezium (tests/delta/test_real_source.py, docs/streaming.md
# "Your own database"): Kafka Connect standalone (tools/kafka-connect/pom.xml, into
# .jars-connect/), the Debezium connector plugins (tools/debezium/pom.xml, unpacked into
# .debezium/), and MariaDB from Debian's packages (PostgreSQL 15 is on the machine image).
CONNECT_JARS := .jars-connect
DEBEZIUM     := .debezium

real-source: jars-connect debezium mariadb ## Install what the real-database tests need: Kafka Connect, Debezium, MariaDB

jars-connect: $(CONNECT_JARS)/.stamp ## Fetch Kafka Connect standalone's jars into .jars-connect/ with Maven

$(CONNECT_JARS)/.stamp: tools/kafka-connect/pom.xml
	rm -rf $(CONNECT_JARS)
	mvn -q -B -f tools/kafka-connect/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(abspath $(CONNECT_JARS))
	touch $@

debezium: $(DEBEZIUM)/.stamp ## Fetch and unpack the Debezium connector plugins into .debezium/

$(DEBEZIUM)/.stamp: tools/debezium/pom.xml
	rm -rf $(DEBEZIUM)
	mvn -q -B -f tools/debezium/pom.xml dependency:unpack -Dplugins.dir=$(abspath $(DEBEZIUM))
	touch $@

# mariadbd from Debian's mariadb-server (as root, as CI runs; its service is not started: the
# tests run their own servers).
mariadb: ## apt-get install mariadb-server when mariadbd is missing
	@command -v mariadbd >/dev/null 2>&1 || test -x /usr/sbin/mariadbd || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends mariadb-server; }

# Debezium against your own database (docs/streaming.md): CONNECTOR names one or more
# connector .properties files; the broker of `make kafka` (or BOOTSTRAP=host:port). The
# Connect module imports only the standard library and the broker module beside it: run by
# its path, it needs no build.
CONNECTOR ?=
BOOTSTRAP ?= $(shell $(PYTHON) -c "import json; print(json.load(open('.kafka/broker.json'))['bootstrap'])" 2>/dev/null)

connect: jars-connect debezium ## Kafka Connect + Debezium on the `make kafka` broker: CONNECTOR=my-db.properties
	$(PYTHON) python/cdc_decode/_kafka_connect.py start --jars $(CONNECT_JARS) --plugins $(DEBEZIUM) \
		--bootstrap $(BOOTSTRAP) $(foreach c,$(CONNECTOR),--connector $(c)) --state .kafka/connect.json

# check-targets: connect-stop needs no .jars-connect, .debezium: only `start` reads them
connect-stop: ## Stop the Kafka Connect `make connect` started (by its PID)
	$(PYTHON) python/cdc_decode/_kafka_connect.py stop --state .kafka/connect.json

# The AutoCDC targets' catalog (Spark's in-memory row-level one, from spark-catalyst's test
# jar) for examples/autocdc and tests/test_autocdc.py; tools/autocdc-jars/pom.xml says why.
AUTOCDC_JARS := .jars-autocdc

jars-autocdc: $(AUTOCDC_JARS)/.stamp ## Fetch the in-memory row-level catalog jar (AutoCDC targets) into .jars-autocdc/

$(AUTOCDC_JARS)/.stamp: tools/autocdc-jars/pom.xml
	mvn -q -B -f tools/autocdc-jars/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(abspath $(AUTOCDC_JARS)) -DexcludeTransitive=true
	touch $@

demo-stream: build jars jars-kafka ## Broker, a producer, a streaming query filling the tables, checked against the source
	$(PY) -m cdc_decode.demo_stream --jars $(JARS) --kafka-jars $(KAFKA_JARS)

# Its last section, commit in PostgreSQL -> visible in Delta, runs benches/stream_lag.py on
# .venv-spark42 with Debezium (make real-source).
bench-stream: build jars jars-kafka venv-spark42 delta-jars real-source ## Streaming: broker -> sink events/s, batch vs streaming, produce -> visible, DB commit -> Delta lag; broker -> Delta against the hand-written pipeline
	$(PY) benches/stream_bench.py
	PYSPARK_PYTHON=$(abspath $(PY42)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY42)) \
		$(PY42) benches/stream_apply_bench.py

bench-spark: build jars ## The Spark race: native vs python vs plain Spark vs passthrough, local[1]
	$(PY) benches/spark_race.py --rounds 5 --out docs/spark-race

# The Datastream tree race (docs/datastream.md): readers of the same generated bucket tree on
# disk at 5,000 and 50,000 files, Avro and JSON, on pyspark 4.3 (.venv) and 3.5
# (.venv-spark35); writes docs/datastream-tree.md and docs/datastream-tree-spark35.md.
bench-datastream: build jars $(VENV35)/.wheel spark35-jars ## Datastream tree race on Spark 4.3 and 3.5: read_datastream vs spark-avro / spark.read.json, local[1]
	$(PY) benches/datastream_tree.py --out docs/datastream-tree.md
	PYSPARK_PYTHON=$(abspath $(PY35)) $(PY35) benches/datastream_tree.py \
		--out docs/datastream-tree-spark35.md

bench-schemas: build ## The schema pass beside a generic and a typed decode of a 100-table stream, per format
	$(PY) benches/schema_pass.py

lint: $(STAMPS)/venv ## rustfmt check, clippy -D warnings, ruff
	cargo fmt --check
	cargo clippy --all-targets --all-features -- -D warnings
	$(VENV)/bin/ruff check python tests benches fuzz examples tools/properties.py tools/check_wheel.py \
		tools/check_targets.py tools/steps.py tools/sweep.py tools/aarch64
	$(VENV)/bin/ruff format --check python tests benches fuzz examples tools/properties.py \
		tools/check_wheel.py tools/check_targets.py tools/steps.py tools/sweep.py tools/aarch64

fmt: $(STAMPS)/venv ## Format Rust and Python sources in place
	cargo fmt
	$(VENV)/bin/ruff format .

proto: ## Rewrite python/cdc_decode/fallback/subscribe.desc from proto/subscribe.proto
	CDC_DECODE_WRITE_DESCRIPTOR=1 cargo test --lib shipped_descriptor

clean: ## Remove build outputs, caches and the venv
	cargo clean
	rm -rf fuzz/target fuzz/corpus fuzz/artifacts
	rm -rf $(VENV) $(VENV35) $(VENV42) $(VENV41) $(DIST) $(DELTA_JARS) $(ICEBERG_JARS) \
		$(ICEBERG_REST_JARS) python/cdc_decode/_native*.so \
		.pytest_cache .ruff_cache .benchmarks spark-warehouse metastore_db derby.log demo-output \
		.jars-kafka .kafka $(CONNECT_JARS) $(DEBEZIUM)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
