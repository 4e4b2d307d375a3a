"""tools/check_targets.py (``make check-targets``) on small repositories: it fails on a
target whose script reads a folder no prerequisite makes (the shape of a demo that ran only
because the tests had fetched its jars first), passes when the target declares it, honours
a written waiver, and names a documented target that does not exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "check_targets.py"

MAKEFILE = """\
.PHONY: help good bad waived jars venv
help: ## List the targets
\t@echo targets
venv: .venv/.stamp ## The venv
.venv/.stamp:
\tmkdir -p .venv && touch $@
jars: .jars/.stamp ## The jars
.jars/.stamp:
\tmkdir -p .jars && touch $@
good: venv jars ## Declares both
\t.venv/bin/python examples/run.py
bad: venv ## Runs a script whose helper reads .jars, without `jars`
\t.venv/bin/python examples/run.py
# check-targets: waived needs no .jars: the helper reads it on a branch this never takes
waived: venv
\t.venv/bin/python examples/run.py
"""
RUN = """\
import sys
sys.path.insert(0, "tests")
from support.helper import JARS  # the helper's literal is what the check must find
print(JARS)
"""
HELPER = '''\
"""Mentions .jars-other in a docstring, which is no use."""
from pathlib import Path
JARS = Path(".") / ".jars"
'''
README = "Run `make good`, `make bad` or `make waived`; `make nope` is not there.\n"


def _repo(root: Path) -> Path:
    files = {
        "Makefile": MAKEFILE,
        "examples/run.py": RUN,
        "tests/support/__init__.py": "",
        "tests/support/helper.py": HELPER,
        "README.md": README,
        ".gitignore": "/.venv/\n/.jars/\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def _check(repo: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, TOOL, "--repo", repo, *targets], capture_output=True, text=True
    )


def test_a_folder_used_but_not_made_fails_and_is_named(tmp_path):
    run = _check(_repo(tmp_path))
    assert run.returncode == 1
    assert "ok   make good" in run.stdout
    assert "FAIL make bad" in run.stdout
    assert "ok   make waived" in run.stdout
    problems = run.stderr.strip().splitlines()
    assert problems == [
        "README.md: `make nope` is no target",
        "make bad: `.venv/bin/python examples/run.py`, in the recipe of bad, uses .jars "
        "(through tests/support/helper.py), which no recipe before it in this dry run makes",
    ]


def test_declared_targets_pass(tmp_path):
    repo = _repo(tmp_path)
    run = _check(repo, "good", "waived", "venv")
    assert run.returncode == 0, run.stderr
    assert "the folders only recipes make: .jars, .venv" in run.stdout
