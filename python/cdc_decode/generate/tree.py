"""Datastream bucket trees on disk: generated files laid out as Datastream writes them,
``root/<db>_<table>/yyyy/mm/dd/hh/mm/<name>``, for tests and benchmarks of readers.

>>> from cdc_decode.generate.tree import write_tree
>>> tree = write_tree("datastream-avro", "bucket/", files=5000, seed=1)
>>> tree.files, tree.events, tree.bytes
(5000, 49375, 16702112)

An Avro file is one value of the ``datastream-avro`` stream (about ten events); a JSON file
is ``lines_per_file`` consecutive lines of the ``datastream-json`` stream. The stream is
generated once for up to ``unique`` files and repeated beyond that, so large trees are cheap
to write (their events repeat; readers do not care). Files are spread over minute folders,
``files_per_minute`` in each, in stream order; names sort in the order they were written.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

START = dt.datetime(2024, 5, 1, 10, 0)
TABLE = "shop.order_items"
SUFFIX = {"datastream-avro": ".avro", "datastream-json": ".jsonl"}


@dataclass
class Tree:
    """What :func:`write_tree` wrote."""

    root: Path
    format: str
    paths: list[Path]
    events: int
    bytes: int

    @property
    def files(self) -> int:
        return len(self.paths)


def tree_files(
    format: str,
    *,
    files: int,
    seed: int = 1,
    lines_per_file: int = 10,
    unique: int = 2000,
    table: str = TABLE,
) -> list[bytes]:
    """The contents of ``files`` Datastream files of ``format`` (no folder layout)."""
    from . import generate

    if format not in SUFFIX:
        raise ValueError(f"a Datastream tree is datastream-avro or datastream-json, not {format}")
    base = min(files, unique)
    if format == "datastream-avro":
        values = generate(format, messages=base, seed=seed, tables=[table]).values
        contents = [v for v in values if v is not None]
    else:
        lines = generate(format, messages=base * lines_per_file, seed=seed, tables=[table]).values
        lines = [v for v in lines if v is not None]
        contents = [
            b"".join(line + b"\n" for line in lines[i : i + lines_per_file])
            for i in range(0, len(lines), lines_per_file)
        ]
    contents = [c for c in contents if c]
    return (contents * (files // max(1, len(contents)) + 1))[:files]


def tree_path(root: Path, index: int, *, suffix: str, files_per_minute: int = 50,
              table: str = TABLE) -> Path:  # fmt: skip
    """Where the ``index``-th file of a tree goes."""
    minute = START + dt.timedelta(minutes=index // files_per_minute)
    folder = Path(root) / table.replace(".", "_") / minute.strftime("%Y/%m/%d/%H/%M")
    return folder / f"{minute:%Y%m%d%H%M}-{index:07d}{suffix}"


def write_files(
    root: str | Path,
    contents: list[bytes],
    *,
    format: str,
    start: int = 0,
    files_per_minute: int = 50,
) -> list[Path]:
    """Writes ``contents`` as the files ``start``, ``start + 1``, ... of a tree under ``root``
    (each written to a temporary name first and renamed, as a bucket shows whole objects)."""
    paths = []
    for i, data in enumerate(contents, start):
        path = tree_path(Path(root), i, suffix=SUFFIX[format], files_per_minute=files_per_minute)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.tmp"
        tmp.write_bytes(data)
        tmp.rename(path)
        paths.append(path)
    return paths


def write_tree(
    format: str,
    root: str | Path,
    *,
    files: int,
    seed: int = 1,
    lines_per_file: int = 10,
    files_per_minute: int = 50,
) -> Tree:
    """Writes a tree of ``files`` generated files under ``root``.

    Returns:
        The :class:`Tree`: the paths in order, and how many events the native decoder finds
        in them (the unit of every reader's events/s).
    """
    import cdc_decode

    contents = tree_files(format, files=files, seed=seed, lines_per_file=lines_per_file)
    paths = write_files(root, contents, format=format, files_per_minute=files_per_minute)
    if format == "datastream-avro":
        events = cdc_decode.decode(contents, format).num_rows
    else:
        lines = [line for c in contents for line in c.splitlines()]
        events = cdc_decode.decode(lines, format).num_rows
    return Tree(Path(root), format, paths, events, sum(len(c) for c in contents))
