"""The bad files of tests/avro_corpus: each gives exactly one error row with its raw bytes,
on both engines, and the engines' batches are equal apart from the errors' wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from compare import assert_same_events
from corpus import assert_files_are_what_the_script_writes, make_corpus

import cdc_decode

FORMAT = "datastream-avro"
CORPUS = Path(__file__).resolve().parent / "avro_corpus"
FILES = sorted(CORPUS.glob("*.avro"))


def test_corpus_files_are_what_the_script_writes():
    assert_files_are_what_the_script_writes("avro_corpus", FILES)


def test_the_files_the_corpus_breaks_are_valid(engine):
    """The corpus is made from these files: each decodes to its two events, so a broken
    file fails for the reason its name says."""
    for codec, value in make_corpus("avro_corpus").controls().items():
        batch = cdc_decode.decode([value], FORMAT, engine=engine)
        assert batch.column("error").to_pylist() == [None, None], codec
        assert [dict(image) for image in batch.column("after").to_pylist()] == [
            {"x": "1"}, {"x": "2"}]  # fmt: skip


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_corpus_file_gives_one_error_row(engine, path):
    raw = path.read_bytes()
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    rows = decoder.decode([raw]).to_pylist() + decoder.finish().to_pylist()
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["format"], row["op"], row["raw"]) == (FORMAT, "error", raw)
    assert row["error"]
    assert decoder.stats() == {
        "messages": 1, "decoded": 0, "events": 0, "errors": 1, "dropped": 0, "pending": 0
    }  # fmt: skip


def test_engines_give_equal_batches_on_the_corpus():
    values = [path.read_bytes() for path in FILES]
    native = cdc_decode.decode(values, FORMAT, engine="native")
    python = cdc_decode.decode(values, FORMAT, engine="python")
    assert native.num_rows == len(values)
    assert_same_events(native, python)
