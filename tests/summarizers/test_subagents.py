"""Issue 14.6b: subagent (sidechain) work is summarized as what the subagent did — the files it changed, its
errors, its result — not dropped. Real Claude Code logs of the corpus (1.0.x sidechain lines in the main file,
2.x agent_progress lines) and minimal synthetic logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ctxcompact.facts import files_touched
from ctxcompact.facts.subagents import subagent_runs
from ctxcompact.formats import read_transcript
from ctxcompact.model import SUBAGENT_MESSAGE, Record
from ctxcompact.options import Options
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.extractive import ExtractiveSummarizer, extract_facts
from ctxcompact.tokens.counts import count_records

DATA = Path(__file__).resolve().parent.parent / "data" / "claude-code"
EXCERPT = DATA / "claude-code-viewer-orchestrator-1.0.98-excerpt.jsonl"
ORCHESTRATOR = DATA / "claude-code-viewer-orchestrator-1.0.108.jsonl"
PROGRESS = DATA / "spotter-subagent-command.jsonl"


def load(path: Path | bytes) -> list[Record]:
    return read_transcript(path, "claude-code").transcript.records


def summary(records: list[Record]) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(records, 20000)).text


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0] if f"## {title}\n" in text else ""


# ------------------------------------------------------------ real logs


def test_files_written_by_subagents_are_in_the_summary_real_log() -> None:
    records = load(EXCERPT)
    main_files = [f.path for f in files_touched(records)]
    assert not [p for p in main_files if p.endswith(".tsx")]  # the main chain wrote none of the app
    text = summary(records)
    files = section(text, "Files and commands")
    for name in ("components/TodoItem.tsx", "todo-app/src/lib/utils.ts", "todo-app/src/app/page.tsx"):
        assert name in files
    runs = section(text, "Subagents")
    assert '"Build TODO components"' in runs and '"Setup Next.js project"' in runs
    # its report is a finding, whole, with the assistant's answers (not cut to one line under Subagents)
    assert 'Task subagent "Build TODO components" reported:\n  ## Component Summary' in section(
        text, "Findings and answers")
    assert "result:" not in runs
    assert "2 error(s), all resolved" in runs  # its two Edit errors, resolved by its later Edit


def test_subagent_runs_real_1_0_108() -> None:
    runs = subagent_runs(load(ORCHESTRATOR))
    assert [r.task for r in runs] == ["Check package configuration", "Analyze current project structure"]
    assert all(r.tool == "Task" and r.call_id and r.result for r in runs)
    (err,) = runs[1].errors
    assert "No such file or directory" in err.text and not err.resolved


def test_agent_progress_lines_real_2_1() -> None:
    records = load(PROGRESS)
    (run,) = subagent_runs(records)
    assert run.task == "Draft beads for linting setup" and run.call_id == "toolu_01Cz2Pnv7qNcnK1ZiocxWhQX"
    unresolved = [e.text for e in run.errors if not e.resolved]
    assert unresolved == ["EISDIR: illegal operation on a directory, read"]
    assert "/home/marco/projects/spotter/mix.exs" in run.read
    assert '"Draft beads for linting setup"' in section(summary(records), "Subagents")


def test_subagent_lines_stay_out_of_the_model_context_real_log() -> None:
    records = load(EXCERPT)
    side = [r for r in records if SUBAGENT_MESSAGE in r.meta]
    assert side and all(r.message is None for r in side)
    assert sum(count_records(side, Options(exact="none")).base) == 0


# ------------------------------------------------------------ synthetic


BASE = {"sessionId": "s", "userType": "external", "cwd": "/w", "version": "1.0.100"}


def line(uuid: str, parent: str | None, kind: str, content: Any, side: bool = False, **extra: Any) -> dict:
    msg: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        msg["id"] = "m-" + uuid
    return {**BASE, "uuid": uuid, "parentUuid": parent, "isSidechain": side, "type": kind, "message": msg,
            **extra}


def encode(lines: list[dict]) -> bytes:
    return b"\n".join(orjson.dumps(x) for x in lines) + b"\n"


def task_log(sidechain: bool) -> list[dict]:
    prompt = "Write the parser in src/parse.py and test it"
    task = {"type": "tool_use", "id": "T1", "name": "Task",
            "input": {"description": "Write the parser", "prompt": prompt, "subagent_type": "coder"}}
    sub = [
        line("s1", None, "user", prompt, True),
        line("s2", "s1", "assistant", [{"type": "tool_use", "id": "w1", "name": "Write",
                                        "input": {"file_path": "/w/src/parse.py", "content": "x"}}], True),
        line("s3", "s2", "user", [{"type": "tool_result", "tool_use_id": "w1", "content": "created"}], True),
        line("s4", "s3", "assistant", [{"type": "tool_use", "id": "b1", "name": "Bash",
                                        "input": {"command": "pytest tests/test_parse.py"}}], True),
        line("s5", "s4", "user", [{"type": "tool_result", "tool_use_id": "b1", "is_error": True,
                                   "content": "E   ValueError: bad token\n1 failed"}], True),
        line("s6", "s5", "assistant", [{"type": "text", "text": "Parser written; one test fails."}], True),
    ]
    if not sidechain:  # CLI 2.x: the same lines as agent_progress lines of the main file
        sub = [{**BASE, "uuid": f"p{i}", "parentUuid": "a1", "isSidechain": False, "type": "progress",
                "parentToolUseID": "T1", "toolUseID": "agent_msg_1",
                "data": {"type": "agent_progress", "agentId": "ag", "prompt": prompt,
                         "message": {"type": s["type"], "message": s["message"], "uuid": s["uuid"]}}}
               for i, s in enumerate(sub)]
    return [
        line("u1", None, "user", "Build the parser with a subagent"),
        line("a1", "u1", "assistant", [task]),
        *sub,
        line("r1", "a1", "user", [{"type": "tool_result", "tool_use_id": "T1", "content": [
            {"type": "text", "text": "Wrote src/parse.py; a test fails."}]}]),
        line("a2", "r1", "assistant", [{"type": "text", "text": "The subagent wrote the parser."}]),
    ]


def test_synthetic_sidechain_and_progress_runs() -> None:
    for sidechain in (True, False):
        records = load(encode(task_log(sidechain)))
        (run,) = subagent_runs(records)
        assert run.task == "Write the parser" and run.tool == "Task" and run.call_id == "T1"
        assert run.changed == ["/w/src/parse.py"]
        assert [e.text for e in run.errors] == ["ValueError: bad token"]
        assert run.result == "Wrote src/parse.py; a test fails."
        text = summary(records)
        assert "/w/src/parse.py (Task subagent)" in section(text, "Files and commands")
        runs = section(text, "Subagents")
        assert "changed /w/src/parse.py" in runs
        assert "1 unresolved error(s), last: ValueError: bad token" in runs
        # the main conversation's own errors are not the subagent's
        assert "ValueError" not in section(text, "Errors")


def test_sidechain_prompt_links_the_run_when_no_id_does() -> None:
    lines = task_log(True)
    records = load(encode(lines))
    assert all("subagent_call" not in r.meta for r in records)  # 1.0.x lines name no call
    assert subagent_runs(records)[0].call_id == "T1"  # tied by the prompt the Task call sent


def test_subagents_carried_across_compactions() -> None:
    first = extract_facts(SummaryRequest(load(encode(task_log(True))), 20000))
    assert first["subagents"][0]["task"] == "Write the parser"
    later = load(encode([line("u9", None, "user", "now refactor")]))
    second = extract_facts(SummaryRequest(later, 20000, prior_facts=first))
    assert second["subagents"] == first["subagents"]
    assert "subagents" not in extract_facts(SummaryRequest(later, 20000))  # no key when there are none


def test_a_subagents_own_log_is_its_own_conversation(tmp_path: Path) -> None:
    """A Claude Code subagent log (subagents/agent-*.jsonl: every line isSidechain with its agentId) is read
    as the conversation it is, not as 0 tokens (issue 28); the 1.0.x sidechain lines inside a main file stay
    the subagent's work (the test above)."""
    from ctxcompact import api

    src = DATA / "spotter-sidechain-agent.jsonl"
    lines = [orjson.loads(x) for x in src.read_bytes().splitlines() if x.strip()]
    assert all(x["isSidechain"] is True and x["agentId"] == "a7be2f0" for x in lines)
    records = api.load_transcript(str(src)).records
    active = [r for r in records if r.message is not None]
    assert len(active) == 52 and not any(r.meta.get("inactive") == "sidechain" for r in records)
    assert not any(SUBAGENT_MESSAGE in r.meta for r in records)  # not "what a subagent did": the log itself
    report = api.estimate(str(src), api.Options(exact="none", use_state=False))
    assert report.to_json()["tokens"]["heuristic"] > 7000
    assert report.to_json()["messages"] == {"assistant": 32, "user": 20}
    # compacted, it stays a subagent log: every line ctxcompact makes carries isSidechain and the agentId
    out = tmp_path / "out.jsonl"
    result = api.run(str(src), api.Options(use_state=False, window=200000, threshold="1%"), output=out,
                     warn=lambda _: None)
    assert result.compacted
    written = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert all(x.get("isSidechain") is True and x.get("agentId") == "a7be2f0" for x in written)
    assert api.validate(str(out)).ok
    again = api.estimate(str(out), api.Options(exact="none", use_state=False)).to_json()
    assert 0 < again["tokens"]["heuristic"] < report.to_json()["tokens"]["heuristic"]
    # a line of it without the agentId is a 1.0.x sidechain line again: the subagent's work, not context
    first = dict(lines[0])
    del first["agentId"]
    one = tmp_path / "one.jsonl"
    one.write_bytes(orjson.dumps(first) + b"\n")
    assert [r.meta.get("inactive") for r in api.load_transcript(str(one)).records] == ["sidechain"]
