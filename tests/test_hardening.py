"""Hardening (docs/hardening.md): the panic boundary, shown with its test hook, and hostile
inputs of every format decoded under a 3 GiB address-space limit on both engines.

Both run in a subprocess: the test hook is an environment variable read once per
process, and the limit must not bind pytest itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _run(*argv: str, env: dict[str, str] | None = None, limit: int | None = None) -> dict:
    """Runs the interpreter with `argv` (under an address-space `limit` in bytes) and
    returns the JSON it prints last."""

    def preexec():
        if limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    done = subprocess.run(
        [sys.executable, *argv],
        env={**os.environ, **(env or {})},
        cwd=HERE,
        preexec_fn=preexec,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


# -- the panic boundary ---------------------------------------------------------------------

PANIC_SCRIPT = """
import json
import pyarrow as pa
import cdc_decode

GOOD = b'{"after":{"id":1},"source":{"db":"d","table":"t"},"op":"c"}'
out = {}
batch = cdc_decode.decode([GOOD, b'{"boom":1}', GOOD], "debezium-json")
out["rows"] = batch.select(["op", "error", "raw"]).to_pylist()
decoder = cdc_decode.Decoder("debezium-json", mode="dropmalformed")
out["dropped"] = decoder.decode([GOOD, b"{}", GOOD]).column("op").to_pylist()
out["stats"] = decoder.stats()
try:
    cdc_decode.decode([GOOD, GOOD], "debezium-json", mode="failfast")
except cdc_decode.DecodeError as error:
    out["failfast"] = str(error)
records = pa.table({
    "_sequence_id_": ["1", "2", "3"], "_operation_type_": ["I", "I", "I"],
    "_before_image_": ["N", "N", "N"], "_after_image_": ["Y", "Y", "Y"], "id": [1, 2, 3],
})
out["records"] = cdc_decode.decode(records, "datahub-tuple").select(
    ["op", "error", "raw"]).to_pylist()
print(json.dumps(out, default=lambda b: b.decode()))
"""


def test_a_panic_is_the_error_of_the_message_it_happened_on():
    out = _run("-c", PANIC_SCRIPT, env={"CDC_DECODE_TEST_PANIC_AT": "1"})
    text = (
        "internal error (a bug in cdc-decode, please report it): "
        "panicked: test hook CDC_DECODE_TEST_PANIC_AT=1"
    )
    assert out["rows"] == [
        {"op": "insert", "error": None, "raw": None},
        {"op": "error", "error": text, "raw": '{"boom":1}'},
        {"op": "insert", "error": None, "raw": None},
    ]
    assert out["dropped"] == ["insert", "insert"]
    assert out["stats"] == {
        "messages": 3, "decoded": 2, "events": 2, "errors": 1, "dropped": 1, "pending": 0
    }  # fmt: skip
    assert out["failfast"] == f"message 1: {text}"
    # Records decode in one call: the record that panicked is the error row, raw kept.
    assert out["records"] == [
        {"op": "insert", "error": None, "raw": None},
        {
            "op": "error",
            "error": text,
            "raw": '{"_sequence_id_":"2","_operation_type_":"I","_before_image_":"N",'
            '"_after_image_":"Y","id":"2"}',
        },
        {"op": "insert", "error": None, "raw": None},
    ]


def test_without_the_hook_nothing_panics():
    out = _run("-c", PANIC_SCRIPT, env={"CDC_DECODE_TEST_PANIC_AT": ""})
    assert [row["op"] for row in out["rows"]] == ["insert", "error", "insert"]
    assert "internal error" not in out["rows"][1]["error"]
    assert "failfast" not in out


# -- hostile inputs under 3 GiB -------------------------------------------------------------

GIB = 1 << 30

HOSTILE = HERE / "hostile.py"


@pytest.mark.parametrize("engine", ["native", "python"])
def test_hostile_inputs_under_3_gib_are_one_error_row_each(engine):
    # One process per engine, as a Spark worker runs one.
    out = _run(str(HOSTILE), engine, limit=3 * GIB)
    assert out["problems"] == []
    assert out["counts"][engine] > 60
