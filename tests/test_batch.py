"""Many transcripts at once: path expansion, a row per file in order, totals, per-file errors that do not
stop the others, and the same results on one process or several."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, coding_session, ctxcompact, jsonl, sys_msg

from ctxcompact import batch, engine
from ctxcompact.errors import UsageError
from ctxcompact.options import Options


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """Every sample, one in a subfolder, a non-jsonl file, and a broken transcript."""
    root = tmp_path / "logs"
    (root / "sub").mkdir(parents=True)
    for p in SAMPLES.glob("*.jsonl"):
        shutil.copy(p, root / p.name)
    (root / "sub" / "deep.jsonl").write_bytes(jsonl([sys_msg("s"), *coding_session(3)]))
    (root / "notes.txt").write_text("not a transcript")
    (root / "broken.jsonl").write_bytes(b'{"role": "user", "content": "ok"}\n{"role": \n')
    return root


def test_expand_directory_recursive_glob_and_duplicates(folder: Path) -> None:
    flat = batch.expand([str(folder)])
    assert [Path(p).name for p in flat] == sorted(p.name for p in folder.glob("*.jsonl"))
    deep = batch.expand([str(folder)], recursive=True)
    assert str(folder / "sub" / "deep.jsonl") in deep and len(deep) == len(flat) + 1
    # a glob, then a file it already named: each file once, in first-seen order
    globbed = batch.expand([str(folder / "openai-*.jsonl"), str(folder / "openai-long.jsonl")])
    assert globbed == [str(folder / "openai-long.jsonl"), str(folder / "openai-session.jsonl")]
    assert batch.expand([str(folder / "**" / "*.jsonl")], recursive=True) == sorted(
        str(p) for p in folder.rglob("*.jsonl"))
    with pytest.raises(UsageError, match="no file matches"):
        batch.expand([str(folder / "*.nothing")])
    with pytest.raises(UsageError):
        batch.expand(["-", str(folder)])
    # a missing plain path is kept: its row reports it
    assert batch.expand([str(folder / "missing.jsonl")]) == [str(folder / "missing.jsonl")]


def test_rows_in_order_with_errors_and_totals(folder: Path) -> None:
    paths = [*batch.expand([str(folder)], recursive=True), str(folder / "missing.jsonl")]
    opts = Options(exact="none", use_state=False, window=16000)
    rows = list(batch.estimate_many(paths, opts, jobs=2))
    assert [r.path for r in rows] == paths
    bad = {Path(r.path).name: r for r in rows if not r.ok}
    assert set(bad) == {"broken.jsonl", "missing.jsonl"}
    assert "line 2" in (bad["broken.jsonl"].error or "") and bad["broken.jsonl"].exit_code == 1
    assert "no such file" in (bad["missing.jsonl"].error or "") and bad["missing.jsonl"].exit_code == 2
    good = [r for r in rows if r.ok]
    for r in good:  # each row is exactly the single-file report
        assert r.report == engine.estimate(r.path, opts).to_json()
    totals = batch.summarize(rows).to_json()
    assert totals["files"] == len(paths) and totals["failed"] == 2
    assert totals["records"] == sum(r.report["records"] for r in good if r.report)
    assert totals["tokens"]["calibrated"] == sum(r.report["tokens"]["calibrated"] for r in good if r.report)
    assert totals["tokens"]["exact"] is None
    assert sum(totals["formats"].values()) == len(good)


def test_one_process_and_two_give_the_same_rows(folder: Path) -> None:
    paths = batch.expand([str(folder)], recursive=True) * 3  # repeats: more tasks than workers
    opts = Options(exact="tiktoken", use_state=False)
    one = [r.to_json() for r in batch.estimate_many(paths, opts, jobs=1)]
    two = [r.to_json() for r in batch.estimate_many(paths, opts, jobs=2)]
    assert one == two
    assert all(r.get("tokens", {"exact": 1})["exact"] for r in one)  # exact counts in every good row


def test_one_state_file_for_several_inputs_is_refused(folder: Path) -> None:
    paths = batch.expand([str(folder)])
    with pytest.raises(UsageError, match="--state"):
        list(batch.estimate_many(paths, Options(state_path=folder / "s.json")))


def test_cli_json_lines_and_exit_code(folder: Path) -> None:
    proc = ctxcompact("estimate", str(folder), "--exact", "none", "--no-state", "--json", "--jobs", "2")
    assert proc.returncode == 1  # broken.jsonl
    lines = [orjson.loads(line) for line in proc.stdout.splitlines()]
    names = sorted(p.name for p in folder.glob("*.jsonl"))
    assert [Path(d["file"]).name for d in lines[:-1]] == names
    assert set(lines[-1]) == {"totals"} and lines[-1]["totals"]["files"] == len(names)
    broken = next(d for d in lines if d.get("file", "").endswith("broken.jsonl"))
    assert broken["exit_code"] == 1 and "line 2" in broken["error"]
    assert b"broken.jsonl" in proc.stderr and b"Traceback" not in proc.stderr
    (folder / "broken.jsonl").unlink()
    ok = ctxcompact("estimate", str(folder), "--exact", "none", "--no-state", "--json")
    assert ok.returncode == 0, ok.stderr


def test_cli_table_check_and_single_file_unchanged(folder: Path) -> None:
    (folder / "broken.jsonl").unlink()
    files = [str(folder / "openai-long.jsonl"), str(folder / "openai-session.jsonl")]
    proc = ctxcompact("estimate", *files, "--exact", "none", "--no-state", "--window", "32000")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert out[0].split()[:2] == ["file", "format"] and len(out) == 4
    assert out[1].startswith(files[0]) and out[-1].startswith("total (2 files, 0 failed)")
    check = ctxcompact("estimate", *files, "--exact", "none", "--no-state", "--window", "32000", "--check")
    assert check.returncode == 10  # openai-long is over a 32k window's threshold: "would compact", no error
    single = ctxcompact("estimate", files[0], "--exact", "none", "--no-state", "--json")
    assert single.returncode == 0 and orjson.loads(single.stdout)["format"] == "openai"  # one object
