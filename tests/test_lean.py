"""A lean install: pyarrow and the wheel only, without the ``python-engine`` extra.

Each check runs a fresh interpreter in which protobuf, fastavro, cramjam and zstandard
cannot be imported (a meta-path finder refuses them), as on an executor that installed
``cdc-decode`` without the extra. ``tests/test_cluster.py`` runs the same on a real venv
that holds only the wheel and pyarrow.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCK = """
import importlib.abc
import sys

BLOCKED = ("google", "fastavro", "cramjam", "zstandard")


class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Block())
for name in list(sys.modules):
    if name.split(".")[0] in BLOCKED:
        del sys.modules[name]
"""


def run_lean(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter without the python-engine extra's modules."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_native_engine_needs_no_extra():
    result = run_lean(
        """
        import cdc_decode
        from cdc_decode import spark as cdc_spark  # the Spark layer imports too
        dts = cdc_decode.decode([b"not protobuf"], "tencent-dts")
        blob = cdc_decode.decode([b'{"x": 1}'], "datahub-blob", engine="python")
        print(dts.column("op").to_pylist(), blob.num_rows)
        assert "google.protobuf" not in sys.modules and "fastavro" not in sys.modules
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "['error']"


@pytest.mark.parametrize(
    ("format", "module"),
    [("tencent-dts", "google"), ("datastream-avro", "cramjam")],
)
def test_python_engine_without_extra_says_what_to_install(format, module):
    result = run_lean(
        f"""
        import cdc_decode
        try:
            cdc_decode.Decoder({format!r}, engine="python")
        except ModuleNotFoundError as exc:
            print(exc)
        else:
            raise SystemExit("no error")
        """
    )
    assert result.returncode == 0, result.stderr
    message = result.stdout.strip()
    assert "pip install 'cdc-decode[python-engine]'" in message
    assert f"engine='python' decodes {format} with {module}" in message


def test_generator_without_extra_says_what_to_install():
    result = run_lean("import cdc_decode.generate")
    assert result.returncode == 1
    assert "pip install 'cdc-decode[python-engine]'" in result.stderr.splitlines()[-1]


def test_wheel_metadata_asks_only_for_pyarrow():
    """The extras as pyproject.toml declares them (the wheel's METADATA is made from it)."""
    from pathlib import Path

    import tomllib

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())[
        "project"
    ]
    assert [d.split(">")[0] for d in project["dependencies"]] == ["pyarrow"]
    extra = {d.split(">")[0] for d in project["optional-dependencies"]["python-engine"]}
    assert extra == {"protobuf", "fastavro", "cramjam", "zstandard"}
    assert project["optional-dependencies"]["spark"] == ["pyspark>=3.5"]
