"""Long property-test runs (`make properties`): each format's hypothesis test with a fixed
seed, in one or more chunks, then a table of what passed.

    .venv/bin/python tools/properties.py --examples 100000 --seed 1 --chunks 2 --jobs 2

Chunk i of a format runs `examples / chunks` examples with seed `seed + i`, so that two
cores can share the work and any chunk can be rerun alone (a failing chunk's command is
printed, with pytest's output and hypothesis's shrunk example). A chunk is at most 5,000
examples (more chunks if need be): hypothesis's memory grows with the examples it tried.
The example database is off (CDC_HYPOTHESIS_NO_DATABASE=1): the seed alone decides what a
run tries.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TESTS = {
    "tencent-dts": "tests/test_properties.py::test_engines_agree_on_random_streams",
    "datahub-blob": "tests/test_json_properties.py::test_datahub_blob_engines_agree",
    "tdsql-json": "tests/test_json_properties.py::test_tdsql_json_engines_agree",
    "debezium-json": "tests/test_json_properties.py::test_debezium_json_engines_agree",
    "datastream-json": "tests/test_json_properties.py::test_datastream_json_engines_agree",
    "datahub-tuple": "tests/test_datahub_tuple.py::test_random_records_decode_alike",
    "datastream-avro": "tests/test_avro_properties.py::test_datastream_avro_engines_agree",
}

MAX_CHUNK = 5_000

# From --hypothesis-show-statistics: "- 2000 passing, 0 failing, and 19 invalid test cases".
COUNTS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")


def run_chunk(format: str, examples: int, seed: int) -> dict:
    """Run one chunk in its own pytest process; return its counts, wall and CPU seconds."""
    env = {"CDC_HYPOTHESIS_EXAMPLES": str(examples), "CDC_HYPOTHESIS_NO_DATABASE": "1"}
    args = ["-m", "pytest", TESTS[format], "-q", "-p", "no:cacheprovider",
            f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = proc.stdout.read()
    # Reaped here rather than by Popen, for the process's own CPU time (user + system).
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    counts = COUNTS.search(output)
    passing, failing, invalid = map(int, counts.groups()) if counts else (0, 0, 0)
    rerun = (
        " ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join([".venv/bin/python", *args])
    )
    return {
        "format": format,
        "seed": seed,
        "passing": passing,
        "failing": failing,
        "invalid": invalid,
        "wall": time.monotonic() - start,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
        "ok": proc.returncode == 0,
        "output": output,
        "rerun": rerun,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="per format, all chunks")
    parser.add_argument("--seed", type=int, default=1, help="chunk i runs with seed + i")
    parser.add_argument("--chunks", type=int, default=1, help="chunks per format, at least")
    parser.add_argument("--jobs", type=int, default=1, help="chunks run at once")
    parser.add_argument("formats", nargs="*", metavar="format", help=f"of {', '.join(TESTS)} (all)")
    opts = parser.parse_args(argv)
    opts.formats = opts.formats or list(TESTS)
    if unknown := set(opts.formats) - set(TESTS):
        parser.error(f"no property test for {', '.join(sorted(unknown))}")
    # hypothesis keeps what it has tried in memory (tdsql-json: 0.9 GiB after 10,000
    # examples; datastream-json: 0.5 GiB after 2,000), so a chunk is at most MAX_CHUNK.
    chunks = max(opts.chunks, -(-opts.examples // MAX_CHUNK))
    per_chunk = -(-opts.examples // chunks)
    work = [(f, per_chunk, opts.seed + i) for f in opts.formats for i in range(chunks)]
    seeds = f"{opts.seed}..{opts.seed + chunks - 1}"
    print(f"{opts.examples} examples per format in {chunks} chunk(s) of {per_chunk}, "
          f"seeds {seeds}, {opts.jobs} at once", flush=True)  # fmt: skip
    started = time.monotonic()
    results = []
    with ThreadPoolExecutor(opts.jobs) as pool:
        for r in pool.map(lambda w: run_chunk(*w), work):
            results.append(r)
            verdict = "ok" if r["ok"] else "FAILED"
            print(
                f"  {r['format']} seed {r['seed']}: {r['passing']} passed, {r['failing']} failing, "
                f"{r['invalid']} invalid, {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU, "
                f"{r['rss']:.0f} MiB peak: {verdict}",
                flush=True,
            )
            if not r["ok"]:
                print(r["output"], f"rerun: {r['rerun']}", sep="\n", flush=True)

    columns = ["format", "examples passed", "wall time (chunks' sum)", "CPU time", "examples/CPU s",
               "peak RSS", "failures"]  # fmt: skip
    print("\n| " + " | ".join(columns) + " |\n|---" + "|---:" * (len(columns) - 1) + "|")
    failed = 0
    for format in opts.formats:
        mine = [r for r in results if r["format"] == format]
        passing = sum(r["passing"] for r in mine)
        cpu = sum(r["cpu"] for r in mine)
        rss = max(r["rss"] for r in mine)
        bad = sum(not r["ok"] for r in mine)
        failed += bad
        cells = [f"`{format}`", f"{passing:,}", f"{sum(r['wall'] for r in mine):.0f} s",
                 f"{cpu:.0f} s", f"{passing / cpu:.0f}", f"{rss:.0f} MiB", f"{bad}"]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    print(f"\n{time.monotonic() - started:.0f} s in all; {failed} chunk(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
