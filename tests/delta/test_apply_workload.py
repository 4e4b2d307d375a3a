"""The apply benchmark's workload (benches/apply_workload.py) at a small size: every
contender's table equals its reference. `make bench-apply` times it at full size; here only
the results are checked (speed is shown by the benchmark, not by tests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

import apply_workload as aw  # noqa: E402


def test_key_ranges_cover_every_key_and_skip_the_gaps():
    keys = [1, 2, 3, 10, 11, 50, 1000, 1001, 1002]
    assert aw.key_ranges("t.id", keys, cap=3) == (
        "(t.id BETWEEN 1 AND 11 OR t.id = 50 OR t.id BETWEEN 1000 AND 1002)"
    )
    assert aw.key_ranges("t.id", [7], cap=4) == "(t.id = 7)"
    assert aw.key_ranges("t.id", [], cap=4) == "FALSE"
    # Never more than cap ranges; every key inside one.
    many = list(range(0, 10_000, 37))
    cond = aw.key_ranges("k", many, cap=16)
    assert cond.count(" OR ") == 15
    for k in many:
        assert any(
            (lo <= k <= hi)
            for lo, hi in (
                (int(p.split()[2]), int(p.split()[4]))
                if "BETWEEN" in p
                else (int(p.split()[2]),) * 2
                for p in cond.strip("()").split(" OR ")
            )
        )


def test_the_references_differ_where_the_plain_merge_is_wrong(tmp_path):
    """Partial images and late changes make the plain MERGE's table differ from the source:
    the benchmark checks each contender against its own reference."""
    gen = aw.generate(aw.Workload(rows=5_000, fraction=0.02, warmup=1, batches=4), tmp_path)
    assert sum(gen.events) > 4 * 100
    assert gen.truth != gen.plain
    # A MERGE that keeps what a partial image lacks is right where the plain one nulls it.
    assert gen.kept != gen.plain and gen.kept != gen.truth


def test_every_contender_equals_its_reference(delta_spark, tmp_path):
    """Keys skewed to recent ones, a warm-up batch and a measured one (late changes move
    from the first to the second): apply_changes against the source's state, the plain
    MERGE and a MERGE with every option of the benchmark against the plain MERGE's rules,
    the MERGE keeping absent columns against its own; apply_changes also on a
    copy-on-write table without the broadcast."""
    w = aw.Workload(
        rows=4_000,
        fraction=0.02,
        pattern="recent",
        warmup=1,
        batches=1,
        files=4,
        late=0.05,
        duplicates=0.05,
        late_partial=aw.per_column_sequences(),
    )
    specs = [
        "apply_changes",
        "apply_changes+cow+nobroadcast",
        "merge",
        "merge+dv+ranges+split+broadcast+nomat",
        "merge+dv+partial",
    ]
    result = aw.run(delta_spark, w, specs, tmp_path, log=lambda _: None)
    outcomes = result["outcomes"]
    assert list(outcomes) == [aw.contender(s).name for s in specs]
    for name, o in outcomes.items():
        assert o.ok, f"{name}: {o.note}"
        assert len(o.seconds) == 1
        assert o.metrics["commits"] >= 1
    # The plain MERGE's table is not the source's (its reference is its own rules').
    assert "differ from the source" in outcomes["merge"].note
    # ... and the MERGE keeping absent columns is nearer to it than the plain one.
    rows = {n: int(o.note.split()[0].replace(",", "")) for n, o in outcomes.items() if o.note}
    assert rows.get("merge+dv+partial", 0) < rows["merge"]
    lines = aw.report(result)
    assert any(line.startswith("| `apply_changes` |") for line in lines)
