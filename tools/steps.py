"""Runs make targets as timed steps, in phases of one or more parallel lanes (`make test`).

    python3 tools/steps.py --make "$(MAKE)" "a b" "c d | e f" ...

Each argument is a phase, run after the one before it ends. A phase is one or more lanes
separated by ``|``; a lane is make targets run one after the other. The lanes of a phase run
side by side. Every step prints a timestamped line as it starts and as it ends (with its
seconds); a step of a one-lane phase prints its output as it goes, a step of a lane beside
another writes it to ``<log dir>/<target>.log`` and prints it in one block when it ends, so
the output of two lanes never interleaves. A failed step ends its lane; the other lanes go
on to their end (a run shows every failure), and the next phases do not run. The last lines
are the table of steps and the run's wall time.

Each step of a parallel lane runs pytest with its own ``--basetemp`` (``PYTEST_ADDOPTS``), so
two suites at once never share (or clean up) each other's temporary folders.

Under ``make -n`` (``n`` in ``MAKEFLAGS``: make runs a recipe that names ``$(MAKE)`` even
then) every step is dry-run in order, its output printed as it comes: what
``tools/check_targets.py`` reads. Needs only Python's standard library.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Step:
    target: str
    lane: int
    phase: int
    started: float = 0.0
    seconds: float = 0.0
    status: str = "not run"


class Runner:
    def __init__(self, make: list[str], log_dir: Path) -> None:
        self.make = make
        self.log_dir = log_dir
        self.began = time.monotonic()
        self.lock = threading.Lock()
        self.steps: list[Step] = []

    def say(self, text: str) -> None:
        with self.lock:
            print(f"[{time.strftime('%H:%M:%S')} +{self.elapsed()}] {text}", flush=True)

    def elapsed(self) -> str:
        seconds = int(time.monotonic() - self.began)
        return f"{seconds // 60:d}:{seconds % 60:02d}"

    def run_step(self, step: Step, alone: bool) -> bool:
        where = "" if alone else f" (lane {step.lane + 1})"
        self.say(f"start {step.target}{where}")
        step.started = time.monotonic() - self.began
        env = dict(os.environ)
        if not alone:
            base = Path(tempfile.mkdtemp(prefix=f"cdc-decode-{step.target}-"))
            extra = env.get("PYTEST_ADDOPTS", "")
            env["PYTEST_ADDOPTS"] = f"{extra} --basetemp={base / 'pytest'}".strip()
        command = [*self.make, step.target]
        began = time.monotonic()
        if alone:
            code = subprocess.call(command, env=env)
            output = None
        else:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = self.log_dir / f"{step.target.replace('/', '_')}.log"
            with open(log, "wb") as out:
                code = subprocess.call(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            output = log.read_text(errors="replace")
        step.seconds = time.monotonic() - began
        step.status = "ok" if code == 0 else f"FAILED (exit {code})"
        with self.lock:
            if output is not None:
                print(f"----- {step.target} (lane {step.lane + 1}) -----", flush=True)
                sys.stdout.write(output)
                print(f"----- end of {step.target} -----", flush=True)
        self.say(f"end {step.target}{where}: {step.status} in {step.seconds:.0f} s")
        return code == 0

    def run_lane(self, steps: list[Step], alone: bool, failed: list[Step]) -> None:
        for step in steps:
            if not self.run_step(step, alone):
                failed.append(step)
                return

    def run(self, phases: list[list[list[str]]]) -> int:
        plan = [
            [[Step(t, lane, phase) for t in targets] for lane, targets in enumerate(lanes)]
            for phase, lanes in enumerate(phases)
        ]
        self.steps = [s for lanes in plan for lane in lanes for s in lane]
        failed: list[Step] = []
        for lanes in plan:
            if len(lanes) == 1:
                self.run_lane(lanes[0], True, failed)
            else:
                threads = [
                    threading.Thread(target=self.run_lane, args=(lane, False, failed))
                    for lane in lanes
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            if failed:
                break
        self.table()
        if failed:
            self.say("failed: " + ", ".join(s.target for s in failed))
            return 1
        return 0

    def table(self) -> None:
        total = time.monotonic() - self.began
        lines = ["", "| phase | lane | step | starts at | seconds | result |",
                 "|---:|---:|---|---:|---:|---|"]  # fmt: skip
        for s in self.steps:
            at = (
                f"{int(s.started) // 60}:{int(s.started) % 60:02d}" if s.status != "not run" else ""
            )
            seconds = f"{s.seconds:.0f}" if s.status != "not run" else ""
            lines.append(
                f"| {s.phase + 1} | {s.lane + 1} | {s.target} | {at} | {seconds} | {s.status} |"
            )
        lines.append(f"\nsteps: {total:.0f} s ({total / 60:.1f} min) of wall time")
        with self.lock:
            print("\n".join(lines), flush=True)


def dry_run(make: list[str], phases: list[list[list[str]]]) -> int:
    """Every step dry-run in order (the caller's ``make -n``), its output as it comes."""
    for lanes in phases:
        for lane in lanes:
            for target in lane:
                code = subprocess.call([*make, target])
                if code != 0:
                    return code
    return 0


def parse(phases: list[str]) -> list[list[list[str]]]:
    parsed = []
    for text in phases:
        lanes = [lane.split() for lane in text.split("|")]
        if not all(lanes):
            raise SystemExit(f"steps.py: an empty lane in phase {text!r}")
        parsed.append(lanes)
    return parsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make", default="make", help="the make command ($(MAKE))")
    parser.add_argument("--log-dir", default="target/steps", help="parallel steps' logs")
    parser.add_argument("phases", nargs="+", help='"a b" (one lane) or "a b | c d" (two)')
    args = parser.parse_args()
    make = [*shlex.split(args.make), "--no-print-directory"]
    phases = parse(args.phases)
    flags = os.environ.get("MAKEFLAGS", "").split()
    if flags and not flags[0].startswith("-") and "n" in flags[0]:
        return dry_run(make, phases)
    return Runner(make, Path(args.log_dir)).run(phases)


if __name__ == "__main__":
    sys.exit(main())
