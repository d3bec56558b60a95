"""The bounded fuzz corpus (issue 19): mutants of the real logs in ``samples/`` and ``tests/data/*`` run
through every command in-process. None may reach "internal error" or a traceback, exit outside
docs/reference/exit-codes.md#the-codes, change its input, or pass `estimate` where `run` rejects it. The long
campaign is ``bench/fuzz.py --campaign N``; the harness is ``tests/fuzz_harness.py``.
"""

from __future__ import annotations

import pytest
from fuzz_harness import COMMANDS, MANIFEST, PYTEST_LIMITS, campaign, load_manifest, run_commands

#: mutants per pytest run: deterministic (seed and numbers fixed), a few seconds on one core
MUTANTS = 48
SEED = 19


def test_fuzz_corpus_has_no_crash() -> None:
    report = campaign(MUTANTS, SEED, PYTEST_LIMITS, timeout=0)  # no time limit: tests assert no timings
    assert report.mutants == MUTANTS
    assert report.runs == MUTANTS * len(COMMANDS)
    assert not report.findings, report.summary() + "\n" + "\n".join(
        f"{f.command} {f.kind}: {f.message} ({f.mutant})" for f in report.findings)


@pytest.mark.skipif(not MANIFEST.exists(), reason="no saved crashing inputs")
@pytest.mark.parametrize("entry", load_manifest()["entries"], ids=lambda e: e["file"])
def test_saved_crash_stays_fixed(entry: dict, tmp_path) -> None:  # type: ignore[type-arg, no-untyped-def]
    data = (MANIFEST.parent / entry["file"]).read_bytes()
    assert run_commands(data, tmp_path, timeout=0) == []


def test_mutants_are_deterministic() -> None:
    from fuzz_harness import load_seeds, make_mutant

    seeds = load_seeds(PYTEST_LIMITS)
    assert len(seeds) >= 20  # the real logs of every format, and the broken ones
    assert make_mutant(seeds, SEED, 7, PYTEST_LIMITS).data == make_mutant(seeds, SEED, 7, PYTEST_LIMITS).data
