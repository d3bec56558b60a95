"""Decisions stated in the middle of a tool loop outlive the turn (issue 23, left open after the handoff
work): what the assistant concluded between its calls is a fact of its own (``Facts.decisions``,
facts/timeline.conclusions), kept in the state's fact store across compactions, not only a timeline step
that the first short budget drops (docs/concepts/summary.md#decisions-along-the-way)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import api
from ctxcompact.evaluate.core import original_records, read_input
from ctxcompact.facts.gather import gather
from ctxcompact.facts.store import MAX_DECISIONS, Entry, Facts, NewFacts, merge
from ctxcompact.facts.timeline import conclusions, states_something
from ctxcompact.formats import read_transcript

DATA = Path(__file__).resolve().parent.parent / "data"
DECISION = "The YAML parser rejects tabs in these files, so I'm switching the loader to tomllib."


def jsonl(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def call(cid: str, cmd: str, text: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def loop(first: int, n: int) -> list[dict[str, Any]]:
    """``n`` steps of a tool loop, each announced ("Let me …") and each with a large result."""
    out: list[dict[str, Any]] = []
    for k in range(first, first + n):
        out += [call(f"c{k}", f"sed -n 1,400p src/module_{k}.py", f"Let me read module {k}."),
                result(f"c{k}", f"def f_{k}():\n    return {k}\n" * 400)]
    return out


@pytest.mark.parametrize(("text", "states"), [
    ("Let me read the file.", False),
    ("Now let me create the JOKE.md file:", False),
    ("Perfect! Let me investigate the existing codex folder structure.", False),
    ("I'm running just that focused test now.", False),
    ("I’m going to codify the expected behavior first.", False),
    ("You're absolutely right!", False),
    ("## Step 3: Generate Technical Specification\n\n---", False),
    ("", False),
    (DECISION, True),
    ("The focused and affected test file pass. I’m doing a final diff review.", True),
    ("Good - I have enough context now. Key findings:\n\n- **No Igniter installers** exist for credo", True),
    ("Perfect! This is a **deterministic solution** - no heuristics needed!", True),
    ("```python\nx = 1  # the code is no statement of its own\n```\nLet me run it.", False),
    ("Checking what /menu actually returns, byte for byte.", False),  # opens with a verb in -ing
    ("Nothing changed in the lock file after the upgrade.", True),  # a noun in -ing opens a statement
    ("Dann nehme ich tomllib statt PyYAML, weil die Dateien Tabs enthalten.", True),  # any language
])
def test_states_something(text: str, states: bool) -> None:
    assert states_something(text) is states


def test_conclusions_are_the_mid_turn_statements_not_the_answers() -> None:
    objs = [{"role": "user", "content": "Migrate the config loader."}, call("c0", "cat a.yaml", DECISION),
            result("c0", "a: 1"), *loop(1, 2),
            {"role": "assistant", "content": "Migrated: the loader uses tomllib."}]
    recs = read_transcript(io.BytesIO(jsonl(objs)), "openai").transcript.records
    found = conclusions(recs)
    assert [t for _, t in found] == [DECISION]  # not "Let me read …", not the answer at the end
    facts = gather(recs).facts
    assert [e.text for e in facts.decisions] == [DECISION]
    assert [e.text for e in facts.findings] == ["Migrated: the loader uses tomllib."]
    assert conclusions([]) == []


def test_the_store_keeps_decisions_by_the_drop_rule() -> None:
    many = tuple(Entry(f"Decision {k}: keep the cache warm for run {k}.", k)
                 for k in range(MAX_DECISIONS + 5))
    merged = merge(Facts(), NewFacts(Facts(decisions=many)))
    assert merged.decisions == many[-MAX_DECISIONS:]  # the oldest go first
    assert merge(merged, NewFacts(Facts(decisions=many))) == merged  # idempotent
    assert Facts.from_json(merged.to_json()) == merged
    assert "decisions" not in Facts().to_json()  # the key only when there is something
    assert Facts.from_json({"decisions": [{"text": 3}, "plain", {"text": "ok", "at": -4}]}).decisions == (
        Entry("plain"), Entry("ok"))


def test_synthetic_mid_turn_decision_survives_later_compactions(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = [{"role": "system", "content": "You are a coding agent."},
             {"role": "user", "content": "Migrate the config loader."},
             call("c0", "cat config/a.yaml", DECISION), result("c0", "name: a\n" * 200), *loop(1, 6)]
    path.write_bytes(jsonl(first))
    opts = api.Options(window=8000)
    summaries = []
    for extra in ([], loop(7, 6), [*loop(13, 6), {"role": "assistant", "content": "Migrated."},
                                   {"role": "user", "content": "Now update the docs."}, *loop(19, 6)]):
        with path.open("ab") as f:
            f.write(jsonl(extra))
        res = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
        assert res.compacted and res.exit_code == 0
        state = json.loads((tmp_path / "s.jsonl.ctxstate.json").read_text())
        summaries.append(state["summary"]["text"])
        assert [d["text"] for d in state["summary"]["facts"]["decisions"]] == [DECISION]
    # each later compaction saw only the records after the previous one: the decision came from the state
    for text in summaries:
        assert DECISION in text
        assert "## Decisions along the way" in text


def test_real_codex_decision_survives_later_compactions(tmp_path: Path) -> None:
    # codemie-rollout (Codex): at line 42, inside the first tool loop, the assistant decides to fall back to
    # rg because the graph MCP tools are not exposed; the summaries of later compactions used to lose it
    src = DATA / "codex" / "codemie-rollout-compaction-threshold.jsonl"
    data = src.read_bytes()
    opts = api.Options(window=30_000)
    _, _, fmt = read_input(src, opts)
    original = original_records(data, fmt, opts)
    log = tmp_path / "rollout.jsonl"
    for cut in (100, 300, None):
        log.write_bytes(data if cut is None else data[: original[cut].offset])
        res = api.run(log, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
        assert res.compacted and res.exit_code == 0
        text = json.loads((tmp_path / "rollout.jsonl.ctxstate.json").read_text())["summary"]["text"]
        assert ("graph MCP tools mentioned by `AGENTS.md` are not exposed in this session, so I’m falling "
                "back to `rg`") in text, cut
