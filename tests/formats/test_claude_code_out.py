"""Claude Code in, Claude Code out (issue 15; docs/reference/formats.md#claude-code-logs): an untouched log
passes through byte for byte, masking rewrites it in place, compaction is written the way Claude Code records
its own, and every output passes the structural check (tests/claude_code_check.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_logs import cc, long_session
from claude_code_check import check_claude_code_output, lines_of
from helpers import jsonl

from ctxcompact import api
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data" / "claude-code"
REAL = sorted(DATA.glob("*.jsonl"))


def run_bytes(data: bytes, tmp_path: Path, **kw: Any) -> tuple[api.RunResult, bytes]:
    out = io.BytesIO()
    res = api.run(data, Options(state_path=tmp_path / "s.json", **kw), output=out, warn=lambda m: None)
    return res, out.getvalue()


def clean_bytes(data: bytes, **kw: Any) -> tuple[api.CleanFileResult, bytes]:
    res = api.clean_file(data, warn=lambda m: None, **kw)
    return res, b"".join(res.lines())


def parallel_log(trailing_call: bool = False) -> list[dict[str, Any]]:
    """Two parallel calls answered in completion order (b before a), a progress line between, as Claude
    Code writes them; optionally a last call still running."""
    lines = [
        cc("u1", None, "user", "look at both files"),
        cc("a1", "u1", "assistant", [{"type": "thinking", "thinking": "both", "signature": "sig-1"}],
           requestId="r1"),
        cc("a2", "a1", "assistant", [{"type": "tool_use", "id": "ta", "name": "Read", "input": {"p": "a"}}],
           requestId="r1"),
        cc("a3", "a2", "assistant", [{"type": "tool_use", "id": "tb", "name": "Read", "input": {"p": "b"}}],
           requestId="r1"),
        {"parentUuid": "a3", "isSidechain": False, "sessionId": "s1", "type": "progress", "uuid": "p1",
         "data": {"type": "hook_progress"}, "timestamp": "2026-01-01T00:00:00.000Z"},
        cc("r2", "a3", "user", [{"type": "tool_result", "tool_use_id": "tb", "content": "B"}]),
        cc("r1", "a2", "user", [{"type": "tool_result", "tool_use_id": "ta", "content": "A"}]),
        cc("a4", "r2", "assistant", [{"type": "redacted_thinking", "data": "opaque"},
                                     {"type": "text", "text": "done"}], requestId="r2"),
    ]
    for o in lines:
        if o["type"] == "assistant":
            o["message"]["id"] = "m-" + o["requestId"]
    if trailing_call:
        lines.append(cc("u2", "a4", "user", "run it"))
        lines.append(cc("a5", "u2", "assistant",
                        [{"type": "tool_use", "id": "tc", "name": "Bash", "input": {"c": "sleep"}}]))
    return lines


# -- item 1: lossless when nothing changes ------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_logs_pass_clean_and_run_byte_for_byte(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    cres, cout = clean_bytes(data)
    assert cres.repairs == [] and cres.output_format == "claude-code"
    assert cout == data
    rres, rout = run_bytes(data, tmp_path, threshold="0")
    assert rres.output_format == "claude-code" and not rres.compacted
    assert rout == data


@pytest.mark.parametrize("trailing", [False, True])
def test_parallel_results_in_completion_order_and_a_live_call_are_no_repairs(trailing: bool) -> None:

    data = jsonl(parallel_log(trailing_call=trailing))
    res, out = clean_bytes(data)
    assert [r.kind for r in res.repairs] == []
    assert out == data
    check_claude_code_output(data, out)


def test_reordering_belongs_to_conversion() -> None:

    data = jsonl(parallel_log(trailing_call=True))
    _, out = clean_bytes(data, to="anthropic")
    objs = lines_of(out)
    assert api.validate(out, "anthropic").ok
    results = [b["tool_use_id"] for o in objs if o["role"] == "user" and isinstance(o["content"], list)
               for b in o["content"] if b.get("type") == "tool_result"]
    assert results == ["ta", "tb", "tc"]  # call order, and the live call answered for the API


def test_a_missing_result_before_a_later_turn_is_still_repaired_and_chained() -> None:

    lines = parallel_log()
    lines = [o for o in lines if o["uuid"] != "r1"]  # ta never answered, and the session went on
    data = jsonl(lines)
    res, out = clean_bytes(data)
    assert [r.kind for r in res.repairs] == ["missing_result"]
    objs = check_claude_code_output(data, out)
    made = [o for o in objs if o.get("uuid") not in {x["uuid"] for x in lines}]
    assert len(made) == 1 and made[0]["message"]["content"][0]["tool_use_id"] == "ta"


# -- item 2: masking, recorded the way Claude Code records a compaction (issue 24 item 3) ------------------


def assert_masked_in_place(inp: bytes, out: bytes) -> int:
    """The input's lines unchanged, then a ``compact_boundary``, then a copy of each live line in order under
    a fresh uuid: a copy differs from its original only in its tool_result contents (now the placeholder) and
    its toolUseResult, and in its envelope (uuid, parent, timestamp), its zeroed usage and its fresh
    ``message.id``, so Claude Code's meter counts the masked context afresh while the originals keep what the
    provider billed. Returns how many copies were masked."""
    if out == inp:
        return 0  # nothing masked, nothing recorded
    after = check_claude_code_output(inp, out, added_roots=1)
    assert out.startswith(inp)
    before = lines_of(inp)
    tail = after[len(before):]
    assert tail, "nothing recorded after the input"
    boundary, copies = tail[0], tail[1:]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert boundary["parentUuid"] is None and boundary["compactMetadata"]["postTokens"] > 0
    assert boundary["compactMetadata"]["postTokens"] < boundary["compactMetadata"]["preTokens"]
    parent = boundary["uuid"]
    by_message = {orjson.dumps(o["message"].get("content")): o for o in before
                  if isinstance(o.get("message"), dict)}
    masked = 0
    uuids = {o.get("uuid") for o in before}
    for b in copies:
        assert b["parentUuid"] == parent and b["uuid"] not in uuids
        parent = b["uuid"]
        if b["type"] == "assistant":
            usage = b["message"].get("usage") or {}
            assert usage.get("input_tokens", 0) == 0 and usage.get("cache_read_input_tokens", 0) == 0
            old_ids = {o["message"].get("id") for o in before if o.get("type") == "assistant"}
            assert b["message"].get("id") is None or b["message"]["id"] not in old_ids
        a = by_message.get(orjson.dumps(b["message"].get("content")))
        if a is not None:
            continue  # unchanged but for its envelope
        masked += 1
        ids = [x.get("tool_use_id") for x in b["message"]["content"]]
        old = next(o for o in before if o.get("type") == "user"
                   and isinstance(o["message"].get("content"), list)
                   and [x.get("tool_use_id") for x in o["message"]["content"]] == ids)
        new = b["message"]["content"]
        assert [x["type"] for x in new] == ["tool_result"] * len(new)
        # the placeholder keeps the content's shape: a string, or a text block in a list
        texts = [x["content"] if isinstance(x["content"], str) else
                 " ".join(c.get("text", "") for c in x["content"] if isinstance(c, dict)) for x in new]
        assert any(t.startswith("[tool result cleared: ") for t in texts)
        assert len(orjson.dumps(b.get("toolUseResult"))) <= len(orjson.dumps(old.get("toolUseResult")))
    return masked


MASK = {"strategy": "mask", "keep_results": 1, "protect_tokens": 0, "min_savings": 0}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_mask_is_recorded_after_real_logs(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    res, out = run_bytes(data, tmp_path, window=2000, **MASK)
    assert res.output_format == "claude-code"
    masked = assert_masked_in_place(data, out)
    assert masked == (res.outcome.masked if res.outcome is not None else 0)  # type: ignore[attr-defined]


def test_prune_tier_masks_after_the_log(tmp_path: Path) -> None:
    data = (DATA / "spotter-tool-heavy.jsonl").read_bytes()
    res, out = run_bytes(data, tmp_path, window=40000, prune=True, keep_results=1, protect_tokens=0,
                         min_savings=0, threshold="29000")
    assert res.outcome is not None and res.outcome.tier == "mask"
    assert assert_masked_in_place(data, out) > 0


def test_mask_keeps_thinking_and_adds_nothing_after_a_live_call(tmp_path: Path) -> None:

    lines = parallel_log(trailing_call=True)
    for o in lines:  # big results, so masking pays
        content = o.get("message", {}).get("content")
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                b["content"] = "x" * 4000
                o["toolUseResult"] = {"stdout": "x" * 4000, "stderr": "", "interrupted": False}
    data = jsonl(lines)
    res, out = run_bytes(data, tmp_path, window=1500, clear_thinking=True, **MASK)
    assert res.outcome is not None and res.outcome.masked == 1  # type: ignore[attr-defined]
    assert assert_masked_in_place(data, out) == 1
    objs = lines_of(out)
    copies = objs[len(lines) + 1:]
    # the live call is last: no synthetic result, no "Understood."
    assert copies[-1]["message"]["content"] == lines[-1]["message"]["content"]
    assert copies[1]["message"]["content"] == lines[1]["message"]["content"]  # thinking and signature kept
    assert lines[7]["message"]["content"][0] == {"type": "redacted_thinking", "data": "opaque"}
    assert any(c["message"]["content"] == lines[7]["message"]["content"] for c in copies)
    masked = next(o for o in copies if o["type"] == "user" and "[tool result cleared: " in str(o["message"]))
    assert masked["toolUseResult"]["stdout"].startswith("[tool result cleared: Read(")


# -- item 3: compaction the way Claude Code records its own --------------------------------------------------


Line = dict[str, Any]


def summary_and_after(objs: list[Line]) -> tuple[Line, Line, list[Line]]:
    i = max(i for i, o in enumerate(objs) if o.get("subtype") == "compact_boundary")
    return objs[i], objs[i + 1], objs[i + 2:]


def test_threshold_compaction_is_appended_like_claude_codes_own(tmp_path: Path) -> None:

    lines = long_session()
    data = jsonl(lines)
    res, out = run_bytes(data, tmp_path, window=8000)
    assert res.compacted and res.output_format == "claude-code"
    objs = check_claude_code_output(data, out, added_roots=1)
    assert out.startswith(data)  # the log stays append-only: every input line as it was
    boundary, summary, rest = summary_and_after(objs)
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] == lines[-1]["uuid"]
    assert boundary["type"] == "system" and boundary["content"] == "Conversation compacted"
    assert boundary["compactMetadata"] == {"trigger": "auto", "preTokens": res.tokens_before,
                                           "postTokens": res.tokens_after}
    assert boundary["sessionId"] == "s1" and boundary["cwd"] == "/p"
    assert summary["parentUuid"] == boundary["uuid"] and summary["isCompactSummary"] is True
    assert summary["isVisibleInTranscriptOnly"] is True and summary["type"] == "user"
    assert summary["message"]["content"].startswith("This session is being continued from a previous")
    assert rest == []
    # read back: the compacted context, not the history
    back = api.load_transcript(out)
    active = [r for r in back.records if r.message is not None]
    assert [r.meta.get("uuid") for r in active] == [summary["uuid"]]
    assert api.estimate(out, Options(window=8000, use_state=False)).calibrated.tokens < res.tokens_before


def test_sliding_window_keeps_the_tail_after_the_boundary(tmp_path: Path) -> None:

    lines = long_session()
    data = jsonl(lines)
    res, out = run_bytes(data, tmp_path, window=8000, strategy="sliding-window", invocation_threshold=3,
                         overlap=1)
    assert res.compacted
    objs = check_claude_code_output(data, out, added_roots=1)
    assert out.startswith(data)
    boundary, summary, rest = summary_and_after(objs)
    assert summary["parentUuid"] == boundary["uuid"] and summary["isCompactSummary"] is True
    kept = [o for o in rest if o["type"] in ("user", "assistant")]
    assert kept and kept[-1]["message"]["content"] == lines[-1]["message"]["content"]
    chain = [summary["uuid"]] + [o["uuid"] for o in rest]
    assert [o["parentUuid"] for o in rest] == chain[:-1]  # one linear chain from the summary to the leaf
    assert not ({o["uuid"] for o in rest} & {o["uuid"] for o in lines})  # fresh uuids for the copies
    for o in rest:
        usage = o["message"].get("usage")
        assert usage is None or usage.get("input_tokens", 0) == 0
    back = api.load_transcript(out)
    active = [r for r in back.records if r.message is not None]
    assert active[0].meta["uuid"] == summary["uuid"] and len(active) == 1 + len(kept)


# -- item 4: --to claude-code ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "genai", "codex"])
def test_to_claude_code_writes_one_linear_session(fmt: str, tmp_path: Path) -> None:
    from claude_code_check import dangling, orphans, roots

    data = (Path(__file__).parent.parent.parent / "samples" / f"{fmt}-session.jsonl").read_bytes()
    res, out = run_bytes(data, tmp_path, to="claude-code")
    assert res.output_format == "claude-code"
    report = api.validate(out)
    assert report.format == "claude-code" and report.ok
    objs = lines_of(out)
    assert roots(objs) == 1 and not dangling(objs) and not orphans(objs)
    assert [o["parentUuid"] for o in objs[1:]] == [o["uuid"] for o in objs[:-1]]  # one linear chain
    assert len({o["uuid"] for o in objs}) == len(objs)
    assert len({o["sessionId"] for o in objs}) == 1
    assert all(o["type"] in ("user", "assistant") and o["isSidechain"] is False and o["cwd"] for o in objs)
    back = api.load_transcript(out)
    assert all(r.meta.get("inactive") is None for r in back.records)  # all on the active branch
    source = api.load_transcript(data)
    system = [r for r in source.records if r.message is not None and r.message.role.value == "system"]
    assert sum(1 for o in objs if o.get("isMeta")) == len(system)


# -- item 7: what ctxcompact writes is detected back as that format -------------------------------

FORMATS = ["openai", "anthropic", "genai", "codex", "claude-code"]


@pytest.mark.parametrize("src", FORMATS)
@pytest.mark.parametrize("to", FORMATS)
@pytest.mark.parametrize("window", [None, 2500])
def test_every_output_is_detected_back_as_its_format(src: str, to: str, window: int | None,
                                                      tmp_path: Path) -> None:
    data = (Path(__file__).parent.parent.parent / "samples" / f"{src}-session.jsonl").read_bytes()
    kw: dict[str, Any] = {"to": to} if window is None else {"to": to, "window": window}
    res, out = run_bytes(data, tmp_path, **kw)
    assert res.output_format == to
    if to == "anthropic" and all(o["role"] in ("system", "user", "assistant") and (
            isinstance(o["content"], str) or all(b.get("type") == "text" for b in o["content"]))
            for o in lines_of(out)):
        # text only: the same bytes are valid OpenAI, and detection calls such a file openai
        # (docs/reference/formats.md#output-and-conversion-to); read as anthropic when named
        assert api.validate(out).format == "openai" and api.validate(out, "anthropic").ok
        return
    report = api.validate(out)
    assert report.format == to and report.ok, (report.format, [str(p) for p in report.errors()])


# -- every Claude Code output the CLI goldens hold passes the structural check ----------------------

GOLDEN = Path(__file__).parent.parent / "data" / "cli"


def _claude_code_goldens() -> list[Path]:
    out = []
    for case in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        spec = orjson.loads((case / "case.json").read_bytes())
        if "claude-code" in spec["input"] and any(case.glob("*.output.jsonl")):
            out.append(case)
    return out


@pytest.mark.parametrize("case", _claude_code_goldens(), ids=lambda p: p.name)
def test_golden_claude_code_outputs_pass_the_structural_check(case: Path) -> None:
    spec = orjson.loads((case / "case.json").read_bytes())
    inp = (Path(__file__).parent.parent.parent / spec["input"]).read_bytes()
    for out_file in sorted(case.glob("*.output.jsonl")):
        out = out_file.read_bytes()
        if api.validate(out).format != "claude-code":
            continue  # --to another format
        appended = out.startswith(inp) and b'"compact_boundary"' in out[len(inp):]
        check_claude_code_output(inp, out, added_roots=1 if appended else 0)


def test_redacted_thinking_survives_conversion_both_ways(tmp_path: Path) -> None:

    data = jsonl(parallel_log())
    _, out = clean_bytes(data, to="anthropic")
    blocks = [b for o in lines_of(out) if isinstance(o["content"], list) for b in o["content"]]
    assert {"type": "redacted_thinking", "data": "opaque"} in blocks
    res, back = run_bytes(out, tmp_path, to="claude-code", format="anthropic")
    assert res.output_format == "claude-code"
    blocks = [b for o in lines_of(back) if isinstance(o["message"]["content"], list)
              for b in o["message"]["content"]]
    assert {"type": "redacted_thinking", "data": "opaque"} in blocks
