"""The project instruction files a client sends the model itself (Codex's AGENTS.md after resuming, Claude
Code's CLAUDE.md on every request: ``Format.client_files``) are not quoted in a summary written into that
client's log; they are in a summary written anywhere else, and the rules the user typed always are
(``facts.rules.sent_by_client``; docs/guides/claude-code-codex.md, "Project instruction files")."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from ctxcompact import api
from ctxcompact.facts.rules import client_file_records, sent_by_client
from ctxcompact.model import Message, Record, Role, TextBlock
from ctxcompact.options import Options
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.extractive import ExtractiveSummarizer

DATA = Path(__file__).resolve().parents[1] / "data"
CRUD = DATA / "codex" / "agentlogs-codex-crud.jsonl"  # a Codex 0.89 rollout under AGENTS.md rules
AGENTS_RULE = "Do not create .sql files yourself."
AGENTS = ("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n- Always use `bun` as the package manager.\n"
          "</INSTRUCTIONS>")
# as Claude Code 1.x put it into the first user message (2.1.328 keeps it in an attachment line instead)
CLAUDE = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
          "# claudeMd\nContents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n"
          "- Never edit vendor/ by hand.\n</system-reminder>")


def rec(n: int, role: Role, text: str) -> Record:
    return Record(index=n, line=n + 1, raw=None, data=None, message=Message(role, [TextBlock(text)]))


@pytest.mark.parametrize(("text", "files", "sent"), [
    ("Rules of AGENTS.md for /repo (a project instruction file):\n- x", ("AGENTS.md",), True),
    ("Rules of AGENTS.md for /repo (a project instruction file):\n- x", (), False),
    ("Rules of AGENTS.md for /repo (a project instruction file):\n- x", ("CLAUDE.md",), False),
    ("Rules of /repo/CLAUDE.md (a project instruction file):\n- x", ("CLAUDE.md",), True),
    ("Rules of /repo/CLAUDE.local.md (a project instruction file):\n- x", ("CLAUDE.md",), False),
    ("Skill deploy: Rules of AGENTS.md for /repo (a project instruction file):", ("AGENTS.md",), False),
])
def test_sent_by_client_names_only_the_clients_own_files(text: str, files: tuple[str, ...],
                                                         sent: bool) -> None:
    assert sent_by_client(text, files) is sent


def summary(records: list[Record], files: tuple[str, ...]) -> str:
    request = SummaryRequest(records=records, budget_tokens=4000, client_files=files)
    return ExtractiveSummarizer().summarize(request).text


def test_the_clients_file_is_left_to_it_and_the_users_rules_stay() -> None:
    records = [rec(0, Role.USER, AGENTS), rec(1, Role.USER, CLAUDE),
               rec(2, Role.USER, "Never push to main. Add a route."), rec(3, Role.ASSISTANT, "Added.")]
    for files, quoted in (((), {"bun", "vendor/"}), (("AGENTS.md",), {"vendor/"}), (("CLAUDE.md",), {"bun"})):
        text = summary(records, files)
        assert "Never push to main." in text  # typed by the user: always quoted
        assert {w for w in ("bun", "vendor/") if w in text} == quoted, files


def test_a_summary_written_into_codexs_log_leaves_agents_md_to_codex(tmp_path: Path) -> None:
    data = CRUD.read_bytes()
    texts = {}
    for to in (None, "openai"):  # the rollout itself, or converted for another client
        buf = io.BytesIO()
        res = api.run(data, Options(state_path=tmp_path / f"{to}.json", window=7300, to=to), output=buf,
                      warn=lambda m: None)
        assert res.compacted and res.summary is not None
        texts[to] = res.summary.text
    assert AGENTS_RULE not in texts[None] and AGENTS_RULE in texts["openai"]


def test_eval_sees_the_file_the_client_sends(tmp_path: Path) -> None:
    # the next call Codex makes holds its AGENTS.md: eval scores the rule as kept
    probe = tmp_path / "p.jsonl"
    probe.write_text(f'{{"category": "rules", "expect": "{AGENTS_RULE}"}}\n')
    out = api.evaluate(str(CRUD), Options(window=7300), api.load_probes(probe), calibration=False)
    assert out["compacted"] and out["probes"]["found"] == 1


def test_the_latest_record_of_each_file_is_the_one_the_client_sends() -> None:
    newer = AGENTS.replace("bun", "pnpm")
    records = [rec(0, Role.USER, AGENTS), rec(1, Role.USER, CLAUDE), rec(2, Role.USER, newer),
               rec(3, Role.ASSISTANT, AGENTS)]
    assert client_file_records(records, ("AGENTS.md",)) == [records[2]]
    assert client_file_records(records, ("AGENTS.md", "CLAUDE.md")) == [records[1], records[2]]
    assert client_file_records(records, ()) == []


def test_the_sliding_window_asks_for_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxcompact.summarizers import fallback

    asked: list[tuple[str, ...]] = []
    real = fallback.summarize

    def spy(request: SummaryRequest, *args: Any) -> Any:
        asked.append(request.client_files)
        return real(request, *args)

    monkeypatch.setattr(fallback, "summarize", spy)
    options = Options(state_path=tmp_path / "s.json", window=4000, strategy="sliding-window",
                      invocation_threshold=2)
    assert api.run(CRUD.read_bytes(), options, output=io.BytesIO(), warn=lambda m: None).compacted
    assert asked and set(asked) == {("AGENTS.md",)}
