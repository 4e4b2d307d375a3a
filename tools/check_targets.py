"""Checks that every make target the docs name works from a fresh clone on its own.

    python3 tools/check_targets.py [TARGET ...]      # `make check-targets`; `make test` runs it

A fresh clone has none of the git-ignored folders the Makefile fills: ``.venv``,
``.venv-spark42``, ``.jars``, ``.jars-delta``, ``dist`` ... (every ignored folder holding a
file target of the Makefile). A target works there only if its own prerequisites make what
its recipe, and the scripts the recipe runs, use. This copies the checkout's files (tracked,
and untracked ones git does not ignore: what a clone would get once committed) into an
empty temporary folder and, for each target named in README.md, docs/, examples/ or
``make help`` (or each TARGET given), dry-runs ``make -n --trace TARGET`` there: the
recipes make would run, each under the target it makes, in order (recursive ``$(MAKE)``
runs included). Then, for every command of that dry run, it finds what the command uses:

- those folders written in the command (``.venv-spark42/bin/python``, ``--jars .jars``);
- for a Python command (a script, ``-m module``, ``-m pytest [paths]``, ``-c code``),
  those folders written as string literals (docstrings aside) in the script and in every
  module of this repository it imports, transitively: examples, tests/support, benches,
  the package (``ROOT / ".jars-delta"`` counts);
- the package itself, when the script imports ``cdc_decode`` with a venv's Python: that
  venv must have had it installed (``maturin develop`` into it, a wheel ``pip
  install``-ed into it, or the checkout ``pip install -e .``-ed into it).

Each use must be made by a recipe that runs before the command, or by the command's own
recipe, in the same dry run; otherwise the target works only after another one made the
folder, and the check names the target, the command, the file and the folder. Run on every
documented target, it also fails on a doc naming ``make X`` in backquotes where ``X`` is no
target. It runs no recipe and needs only Python's standard library, git and make: seconds.

What it cannot see: paths assembled at run time from pieces, files a script reads through
an environment variable, and whether a literal's branch runs at all. A literal on a branch
the target never takes (a fixture its tests do not request) is waived in the Makefile,
beside the target, with the reason: ``# check-targets: TARGET needs no FOLDER: why``.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A use the analysis cannot rule out but the target does not make: written in the Makefile
# beside the target, with the reason, as
#   # check-targets: TARGET needs no FOLDER[, FOLDER]: why
WAIVER = re.compile(r"^# check-targets: (\S+) needs no ([^:]+):", re.M)
DOCS = ["README.md", "docs/**/*.md", "examples/**/*"]
# Where `import x.y` is looked for, in order (the script's own folder comes first).
IMPORT_ROOTS = ["python", "tests", "benches", "."]
TRACE = re.compile(
    r"^(?:\S+):\d+: (?:update target '(.+)' due to: .*|target '(.+)' does not exist)$"
)
# Quoted strings (kept whole), and the shell's separators between simple commands.
SHELL = re.compile(r"(\"(?:\\.|[^\"\\])*\"|'[^']*')|(&&|\|\||[;|`\n]|\$\(|\))")
KEYWORDS = {"do", "then", "else", "if", "while", "until", "!", "time", "exec"}
PYTHON = re.compile(r"(?:^|/)python3?(?:\.\d+)?$")
INSTALL_MATURIN = re.compile(r"VIRTUAL_ENV=(\S+)\s+\S*maturin develop")
INSTALL_WHEEL = re.compile(r"(\S+)/bin/python -m pip install [^\n]*\.whl")
# An editable install of the checkout (maturin's PEP 660 build, as `make build` runs it).
INSTALL_EDITABLE = re.compile(r"(\S+)/bin/python -m pip install [^\n]*-e \.(?:\s|$)")


@dataclass
class Block:
    """The recipe make runs for one target, as the dry run printed it."""

    target: str
    commands: list[str] = field(default_factory=list)


def snapshot(repo: Path, into: Path) -> None:
    """The checkout's files a clone would have (tracked ones and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = repo / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def make(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=tree, env=env, capture_output=True, text=True
    )


def database(tree: Path) -> tuple[set[str], set[str]]:
    """The Makefile's targets, and its file targets (relative to ``tree``)."""
    text = make(tree, "-pRrnq", "help").stdout
    files = text.split("\n# Files\n", 1)[1].split("\n# files hash-table stats", 1)[0]
    targets, file_targets = set(), set()
    previous = ""
    for line in files.splitlines():
        match = re.match(r"^([^#\s][^:=]*):(?!=)", line)
        if match and previous != "# Not a target:":
            name = relative(match.group(1), tree)
            targets.add(name)
            if "/" in name or name.startswith("."):
                file_targets.add(name)
        previous = line
    phony = re.search(r"^\.PHONY: (.*)$", files, re.M)
    file_targets -= set(phony.group(1).split()) if phony else set()
    return targets, file_targets


def relative(path: str, tree: Path) -> str:
    return path.removeprefix(f"{tree}/")


def artifact_folders(repo: Path, file_targets: set[str]) -> set[str]:
    """Top folders of the file targets that git ignores: what only a recipe makes."""
    tops = {t.split("/")[0] for t in file_targets if "/" in t}
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *sorted(f"{t}/x" for t in tops)],
        cwd=repo, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return {p.split("/")[0] for p in ignored}


def documented(tree: Path, targets: set[str]) -> tuple[set[str], list[str]]:
    """Targets the docs and ``make help`` name, and backquoted ``make X`` naming no target."""
    named = set(re.findall(r"^  make (\S+)", make(tree, "help").stdout, re.M))
    unknown = []
    for pattern in DOCS:
        for path in sorted(tree.glob(pattern)):
            if not path.is_file():
                continue
            text = path.read_text(errors="replace")
            for words in re.findall(r"\bmake((?:[ \t]+[A-Za-z0-9_./-]+(?:=\S*)?)+)", text):
                for word in words.split():
                    if word in targets:
                        named.add(word)
            for quoted in re.findall(r"`make ([a-z][a-z0-9_-]*)[^`]*`", text):
                if quoted not in targets:
                    unknown.append(f"{path.relative_to(tree)}: `make {quoted}` is no target")
    return named, unknown


def dry_run(tree: Path, target: str) -> tuple[list[Block], str]:
    """The blocks of ``make -n --trace target`` in order, or the error make gave."""
    run = make(tree, "-n", "--trace", target)
    if run.returncode != 0:
        return [], (run.stderr.strip() or run.stdout.strip())
    blocks: list[Block] = []
    pending = ""
    for line in run.stdout.splitlines():
        match = TRACE.match(line)
        if match and not pending:
            blocks.append(Block(relative(match.group(1) or match.group(2), tree)))
            continue
        if not blocks:
            continue
        pending += line
        if line.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if not pending.lstrip().startswith("#"):
            blocks[-1].commands.append(pending.replace(f"{tree}/", ""))
        pending = ""
    return blocks, ""


class Uses:
    """What commands use: artifact folders, found in their text and in the Python they run."""

    def __init__(self, tree: Path, folders: set[str]):
        self.tree = tree
        self.folders = folders
        alternatives = "|".join(re.escape(f) for f in sorted(folders, key=len, reverse=True))
        self.pattern = re.compile(
            rf"(?:^|(?<=[\s'\"=:,(]))(?:\./)?({alternatives})(?=[/\s'\":,;)]|$)"
        )
        self.cache: dict[Path, tuple[set[str], list[Path], bool]] = {}
        # pyproject.toml's console scripts and pytest's testpaths and --ignore options (read
        # with re: tomllib is Python 3.11+, the Makefile's python3 may be 3.10).
        toml = tree / "pyproject.toml"
        pyproject = toml.read_text() if toml.is_file() else ""
        scripts = re.search(r"^\[project\.scripts\]\n((?:[^\[\n].*\n)*)", pyproject, re.M)
        self.scripts = dict(
            re.findall(r'^([\w-]+) = "([\w.]+):\w+"', scripts.group(1) if scripts else "", re.M)
        )
        testpaths = re.search(r"^testpaths = \[(.*)\]", pyproject, re.M)
        self.testpaths = re.findall(r'"([^"]+)"', testpaths.group(1)) if testpaths else ["."]
        addopts = re.search(r"^addopts = (.*)$", pyproject, re.M)
        self.ignore = re.findall(r"--ignore=([^\s\"]+)", addopts.group(1) if addopts else "")

    def in_text(self, text: str) -> set[str]:
        return set(self.pattern.findall(text))

    def of_command(self, command: str) -> list[tuple[str, str, str]]:
        """``(folder or "cdc_decode@venv", where, file)`` for each use in one command."""
        found = []
        for piece in pieces(command):
            try:
                words = shlex.split(piece)
            except ValueError:
                words = piece.split()
            while words and words[0] in KEYWORDS:
                words.pop(0)
            if words and words[0] in ("rm", "for"):  # removing a folder is no use of it
                continue
            found += [(f, piece.strip(), "") for f in self.in_text(piece)]
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words.pop(0)
            if not words:
                continue
            entries, venv = self.entries(words)
            for entry in entries:
                for used, path in self.closure(entry):
                    where = str(path.relative_to(self.tree))
                    found.append((used if used != "cdc_decode" else f"cdc_decode@{venv}",
                                  piece.strip(), where))  # fmt: skip
        return found

    def entries(self, words: list[str]) -> tuple[list[Path | str], str]:
        """The files (or ``-c`` code) a command runs with Python, and its venv folder."""
        program, args = words[0], words[1:]
        venv = program.split("/bin/")[0] if "/bin/" in program else "system"
        name = program.rsplit("/", 1)[-1]
        if name in self.scripts:
            return [f"import {self.scripts[name]}"], venv
        if not PYTHON.search(program):
            script = self.tree / program
            return ([script] if script.suffix == ".py" and script.is_file() else []), venv
        entries: list[Path | str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "-c" and i + 1 < len(args):
                return [args[i + 1]], venv
            if arg == "-m" and i + 1 < len(args):
                module = args[i + 1]
                if module == "pytest":
                    return self.pytest(args[i + 2 :]), venv
                if module in ("pip", "venv"):
                    return [], venv
                return [f"import {module}"], venv
            if arg.startswith("-"):
                i += 2 if arg in ("-W", "-X") else 1
                continue
            path = self.tree / arg
            return ([path] if path.is_file() else []), venv
        return entries, venv

    def pytest(self, args: list[str]) -> list[Path | str]:
        """The test modules, conftest files and plugins a pytest command loads."""
        paths, plugins, overridden = [], [], False
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in ("-p", "-W", "-o", "-k", "-m", "--benchmark-storage"):
                value = args[i + 1] if i + 1 < len(args) else ""
                if arg == "-p" and not value.startswith("no:"):
                    plugins.append(f"import {value}")
                overridden |= arg == "-o" and value.startswith("addopts")
                i += 2
                continue
            if not arg.startswith("-") and (self.tree / arg).exists():
                paths.append(self.tree / arg)
            i += 1
        ignore = [] if overridden else [self.tree / p for p in self.ignore]
        files = []
        for path in paths or [self.tree / p for p in self.testpaths]:
            found = [path] if path.is_file() else sorted(path.rglob("*.py"))
            for file in found:
                name = file.name
                tested = name.startswith("test_") or name.endswith("_test.py")
                if (tested or name == "conftest.py") and not any(
                    file.is_relative_to(i) for i in ignore
                ):
                    files.append(file)
            for parent in [path, *path.parents]:
                conftest = parent / "conftest.py"
                if conftest.is_file() and parent.is_relative_to(self.tree):
                    files.append(conftest)
        return [*files, *plugins]

    def closure(self, entry: Path | str) -> list[tuple[str, Path]]:
        """Folders (and ``cdc_decode``) used by ``entry`` and the modules it imports."""
        if isinstance(entry, str):  # code: its imports are the entry points
            try:
                code = ast.parse(entry)
            except SyntaxError:
                return []
            start = [p for m in self.imports(code, self.tree) for p in m]
            uses_package = any(n.split(".")[0] == "cdc_decode" for n in _names(code))
            result = [("cdc_decode", self.tree)] if uses_package else []
        else:
            start, result = [entry], []
        seen: set[Path] = set()
        todo = list(start)
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            folders, modules, package = self.scan(path)
            result += [(f, path) for f in folders]
            if package:
                result.append(("cdc_decode", path))
            todo += modules
        return result

    def scan(self, path: Path) -> tuple[set[str], list[Path], bool]:
        """One file's folder literals, the repository modules it imports, and whether it
        imports ``cdc_decode``."""
        if path not in self.cache:
            tree = ast.parse(path.read_text(), str(path))
            docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
            folders: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if id(node) not in docstrings:
                        folders |= self.in_text(node.value)
            modules = [p for found in self.imports(tree, path.parent) for p in found]
            package = any(n.split(".")[0] == "cdc_decode" for n in _names(tree)) or any(
                isinstance(n, ast.ImportFrom) and n.level and _in_package(path)
                for n in ast.walk(tree)
            )
            self.cache[path] = (folders, modules, package)
        return self.cache[path]

    def imports(self, tree: ast.AST, here: Path) -> list[list[Path]]:
        """The repository files each import of ``tree`` resolves to."""
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here
                    for _ in range(node.level - 1):
                        base = base.parent
                    parts = [*base.relative_to(self.tree).parts, *(node.module or "").split(".")]
                    prefix = ".".join(p for p in parts if p)
                    names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
                    found.append([p for n in names for p in self.resolve(n, [self.tree])])
                    continue
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            roots = [here, *(self.tree / r for r in IMPORT_ROOTS)]
            found.append([p for n in names for p in self.resolve(n, roots)])
        return found

    def resolve(self, name: str, roots: list[Path]) -> list[Path]:
        parts = name.split(".")
        for root in roots:
            base = root.joinpath(*parts)
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    # A package's __init__ runs on the way in: `import a.b` runs a/__init__.
                    inits = [root.joinpath(*parts[:k], "__init__.py") for k in range(1, len(parts))]
                    return [candidate, *(i for i in inits if i.is_file())]
        return []


def pieces(command: str) -> list[str]:
    """The simple commands of a shell command line (quotes respected)."""
    found, start = [], 0
    for match in SHELL.finditer(command):
        if match.group(2):
            found.append(command[start : match.start()])
            start = match.end()
    found.append(command[start:])
    return [p for p in found if p.strip()]


def _names(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _in_package(path: Path) -> bool:
    return "cdc_decode" in path.parts


def check(
    tree: Path, target: str, uses: Uses, file_targets: set[str], waived: set[tuple[str, str]]
) -> list[str]:
    """The problems of one target's dry run."""
    blocks, error = dry_run(tree, target)
    if error:
        return [f"make -n {target} fails: {error}"]
    made: set[str] = set()
    unmade: dict[tuple[str, str], dict[str, set[str]]] = {}
    for block in blocks:
        if block.target in file_targets and "/" in block.target:
            made.add(block.target.split("/")[0])
        for command in block.commands:
            for pattern in (INSTALL_MATURIN, INSTALL_WHEEL, INSTALL_EDITABLE):
                for venv in pattern.findall(command):
                    made.add(f"cdc_decode@{relative(venv, tree).removeprefix('./')}")
        for command in block.commands:
            for used, piece, where in uses.of_command(command):
                if used in made or (block.target, used) in waived:
                    continue
                found = unmade.setdefault((block.target, used), {})
                shown = re.sub(r"^(?:\w+=\S+\s+)*", "", " ".join(piece.split()))
                found.setdefault(shown, set()).add("" if where == "." else where)
    problems = []
    for (recipe, used), commands in sorted(unmade.items()):
        what = f"cdc_decode installed in {used[11:]}" if used.startswith("cdc_decode@") else used
        for piece, files in sorted(commands.items()):
            files.discard("")
            shown = sorted(files)[:3] + ([f"{len(files) - 3} more"] if len(files) > 3 else [])
            via = f" (through {', '.join(shown)})" if files else ""
            problems.append(
                f"make {target}: `{piece[:120]}`, in the recipe of {recipe}, uses {what}{via}, "
                "which no recipe before it in this dry run makes"
            )
    return sorted(set(problems))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="default: every target the docs name")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout (default: this)")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    with tempfile.TemporaryDirectory(prefix="check-targets-") as tmp:
        tree = Path(tmp)
        snapshot(repo, tree)
        targets, file_targets = database(tree)
        folders = artifact_folders(repo, file_targets)
        waived = {
            (target, folder.strip())
            for target, names in WAIVER.findall((tree / "Makefile").read_text())
            for folder in names.split(",")
        }
        named, unknown = documented(tree, targets)
        chosen = args.targets or sorted(named)
        uses = Uses(tree, folders)
        problems = [] if args.targets else list(unknown)
        for target in chosen:
            found = check(tree, target, uses, file_targets, waived)
            problems += found
            print(f"{'FAIL' if found else 'ok  '} make {target}")
    print(f"{len(chosen)} targets dry-run from a fresh copy of {repo}; the folders only "
          f"recipes make: {', '.join(sorted(folders))}")  # fmt: skip
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
