"""The policy that compiles a small table's ``apply_changes`` call when Spark's code cache
kept its code (``cdc_decode.spark._codegen``; docs/apply.md, "Cost")."""

import pytest

from cdc_decode.spark import _codegen


@pytest.fixture(autouse=True)
def _fresh():
    _codegen.forget()
    yield
    _codegen.forget()


def _calls(shape, classes):
    """Run calls of ``shape`` that compile ``classes[i]`` classes each when compiled;
    return how each ran."""
    ran = []
    for n in classes:
        compiled = _codegen.compiles(shape)
        _codegen.ran(shape, compiled, n if compiled else 0)
        ran.append(compiled)
    return ran


def test_a_shape_is_interpreted_first_then_compiled_while_its_code_is_kept():
    assert _calls("t", [0, 60, 1, 0, 2, 0]) == [False, True, True, True, True, True]


def test_code_found_evicted_backs_off_then_tries_again():
    misses = _codegen.MISSES + 1
    ran = _calls("t", [0, 60, misses] + [0] * _codegen.BACKOFF + [60, 0, 0])
    back = [False] * _codegen.BACKOFF
    assert ran == [False, True, True, *back, True, True, True]


def test_the_first_compiled_call_is_not_judged():
    # Warming the cache compiles every class: no back-off for that.
    assert _calls("t", [0, 500, 0]) == [False, True, True]


def test_an_uncounted_compiled_call_backs_off():
    assert _codegen.compiles("t") is False
    _codegen.ran("t", False, 0)
    _codegen.ran("t", True, 60)
    _codegen.ran("t", True, None)  # no counter: as if the code was gone
    assert [_codegen.compiles("t") for _ in range(_codegen.BACKOFF + 1)] == [False] * (
        _codegen.BACKOFF
    ) + [True]


def test_shapes_are_their_own_and_the_oldest_are_forgotten(monkeypatch):
    monkeypatch.setattr(_codegen, "SHAPES", 2)
    for shape in ("a", "b", "c"):
        _codegen.ran(shape, False, 0)
    assert [_codegen.compiles(s) for s in ("a", "b", "c")] == [False, True, True]


def test_the_counter_is_none_without_a_jvm():
    class Connect:  # a session without a JVM gateway, as Spark Connect's
        pass

    assert _codegen.compilations(Connect()) is None
