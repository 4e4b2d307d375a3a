"""The bad inputs of tests/dts_corpus: each gives exactly one error row, on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import assert_files_are_what_the_script_writes

import cdc_decode

CORPUS = Path(__file__).resolve().parent / "dts_corpus"
FILES = sorted(CORPUS.glob("*.bin"))


def test_corpus_files_are_what_the_script_writes():
    assert_files_are_what_the_script_writes("dts_corpus", FILES)


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_corpus_file_gives_one_error_row(engine, path):
    raw = path.read_bytes()
    decoder = cdc_decode.Decoder("tencent-dts", engine=engine)
    batch = decoder.decode([raw])
    rest = decoder.finish()
    rows = batch.to_pylist() + rest.to_pylist()
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["format"], row["op"], row["raw"]) == ("tencent-dts", "error", raw)
    assert row["error"]
    assert decoder.stats() == {
        "messages": 1, "decoded": 0, "events": 0, "errors": 1, "dropped": 0, "pending": 0
    }  # fmt: skip
