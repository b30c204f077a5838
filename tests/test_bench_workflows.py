"""benchmarks/workflows.py, run small so it cannot rot (figures are printed, never
asserted)."""

from __future__ import annotations

import pytest

from benchmarks import workflows


@pytest.mark.parametrize("shape", ["fan", "chain"])
def test_the_shapes_have_the_steps_asked_for(shape: str) -> None:
    for steps in (1, 2, 3, 1001, 2500):
        assert len(workflows.SHAPES[shape](steps)) == steps


def test_the_benchmark_runs_and_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    workflows.main(["--steps", "40", "--runs", "1", "--backends", "sqlite"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["sqlite", "fan", "40"], ["sqlite", "chain", "40"], ["sqlite", "jobs", "40"],
    ]  # fmt: skip
    assert all("steps/s" in line and "best" in line for line in lines)
    assert all("read back" in line for line in lines[:2])
