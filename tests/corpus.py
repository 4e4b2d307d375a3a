"""Saved corpora of bad inputs (``tests/<name>_corpus/``): each folder holds the files and
the ``make_corpus.py`` that writes them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent


def make_corpus(folder: str) -> ModuleType:
    """The ``make_corpus.py`` of ``tests/<folder>``, imported."""
    path = TESTS / folder / "make_corpus.py"
    spec = importlib.util.spec_from_file_location(f"{folder}.make_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_files_are_what_the_script_writes(folder: str, files: list[Path]) -> None:
    """The saved ``files`` are exactly those ``make_corpus.corpus()`` writes, byte for byte."""
    expected = make_corpus(folder).corpus()
    assert sorted(expected) == [path.name for path in files]
    for path in files:
        assert path.read_bytes() == expected[path.name], path.name
