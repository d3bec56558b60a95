"""The check of an LLM summary before it replaces a conversation
(docs/concepts/summary.md#the-check-of-an-llm-summary).

A weak model (a small local one, a truncated reply) may answer with text about summaries, drop the user's
rules or forget the latest request. The facts the extractive summary is built from are extracted
deterministically anyway (:func:`.extractive.extract_facts`), so each summary is checked against them:

- **rejected** (the caller falls back to the extractive summary): the text is empty, has none of the sections
  the prompt asks for, or is off-topic (it names none of the conversation's distinctive terms: identifiers,
  file names, long words of the requests, leaving out the prompt's own vocabulary so an echo of the
  instructions does not count);
- **amended**: some facts are missing: the rules (verbatim), the latest request, the open todos with their
  status, the files touched, the last error and its status. They are added back in a pinned-facts block;
- **passed**: every fact is there.

A fact counts as present when its text appears in the summary after normalizing case, whitespace and
quotes (rules and the latest request by their first :data:`MATCH_CHARS` characters; the error by that or
by one of its parts, such as the exception message; files by their full path; todos by their content with
the status on the same line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..facts.text import shorten
from ..model import Record, Role
from .base import fit_summary
from .prompt import SYSTEM_PROMPT

#: the sections the prompt asks for (SYSTEM_PROMPT), in order
SECTIONS = ("User goals and rules", "Timeline", "Technical context", "Files and code", "Active work",
            "Unresolved issues", "Next step")
PINNED_HEADING = "## Pinned facts"
# A long fact is matched by its head: a model that quotes a rule but trims its tail still kept the rule.
MATCH_CHARS = 120
# The pinned block may take at most this share of the summary budget; files (least recent first) go
# first when it would take more, then the text is cut (rules come first, so they are the last to go).
PINNED_SHARE = 0.6
MAX_TERMS = 400
# An error line often wraps its message ("FAILED test_x - AssertionError: expected 3"); a summary that
# quotes the message itself (a part of at least this many characters) kept the error.
_ERROR_PARTS = re.compile(r"\s[-–—:]\s|::|:\s")
MIN_ERROR_PART = 16

_WORD = re.compile(r"[A-Za-z_][\w./-]*[\w]")
_STOP = frozenset((
    "about", "above", "after", "again", "against", "because", "been", "before", "being", "below",
    "between", "both", "could", "does", "doing", "down", "during", "each", "from", "further", "have",
    "having", "here", "into", "itself", "just", "more", "most", "once", "only", "other", "over", "same",
    "should", "some", "such", "than", "that", "their", "theirs", "them", "then", "there", "these",
    "they", "this", "those", "through", "under", "until", "very", "were", "what", "when", "where",
    "which", "while", "will", "with", "would", "your", "yours", "please", "thanks", "thank", "okay",
    "also", "need", "want", "make", "like", "know", "using", "used",
))


@dataclass(slots=True)
class SummaryCheck:
    """What the check found and did; kept in the state (``summary.check``) and shown on ``run``'s line."""

    verdict: str  # "passed", "amended" (facts pinned) or "rejected" (the extractive summary stood in)
    sections_missing: list[str] = field(default_factory=list)
    added: dict[str, int] = field(default_factory=dict)  # fact kind → how many were pinned
    reason: str | None = None  # why it was rejected

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "sections_missing": list(self.sections_missing),
                "added": dict(self.added), "reason": self.reason}


def _norm(text: str) -> str:
    text = text.lower().replace("`", "").replace("“", '"').replace("”", '"').replace("’", "'")
    return " ".join(text.replace('"', " ").replace("'", " ").split())


def _has(haystack: str, needle: str) -> bool:
    n = _norm(needle)[:MATCH_CHARS].strip()
    return bool(n) and n in haystack


def sections_in(text: str) -> list[str]:
    """The prompt's sections that ``text`` has as headings (Markdown, bold or numbered, any case)."""
    found = []
    for title in SECTIONS:
        pattern = r"^[\s#*>\d.)-]*" + re.escape(title.lower()) + r"\b"
        if re.search(pattern, text.lower(), re.M):
            found.append(title)
    return found


_PROMPT_WORDS = frozenset(w.lower() for w in _WORD.findall(SYSTEM_PROMPT))


def distinctive_terms(records: Iterable[Record], facts: dict[str, Any]) -> set[str]:
    """Terms a summary of this conversation would name: identifiers and file names, and words of six
    letters or more that people and the assistant wrote, leaving out the prompt's own vocabulary."""
    terms: set[str] = set()
    texts: list[str] = []
    for r in records:
        m = r.message
        if m is not None and m.role in (Role.USER, Role.ASSISTANT) and not m.is_tool_result_only:
            texts.append(m.text())
    texts += facts["rules"] + facts["goals"] + ([facts["latest_request"]] if facts["latest_request"] else [])
    for text in texts:
        for w in _WORD.findall(text):
            lw = w.lower().strip("./-")
            identifier = any(c in lw for c in "_./") or any(c.isdigit() for c in lw) or (
                w[1:] != w[1:].lower() and w[1:] != w[1:].upper())
            if lw in _PROMPT_WORDS or lw in _STOP or len(lw) < 4:
                continue
            if identifier or len(lw) >= 6:
                terms.add(lw)
        if len(terms) >= MAX_TERMS:
            break
    for f in facts["files"]:
        base = f["path"].rstrip("/").rsplit("/", 1)[-1].lower()
        if len(base) >= 3:
            terms.add(base)
    return terms


def _missing(summary: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The facts ``summary`` does not carry, by kind."""
    hay = _norm(summary)
    lines = [_norm(x) for x in summary.splitlines()]
    out: dict[str, Any] = {}
    latest = facts["latest_request"]
    if latest and not _has(hay, latest):
        out["latest_request"] = latest
    # a rule inside the latest request is pinned with it, once
    rules = [r for r in facts["rules"] if not _has(hay, r) and not (
        "latest_request" in out and _norm(r) in _norm(latest or ""))]
    if rules:
        out["rules"] = rules
    todos = []
    for t in facts["todos"]:
        content = _norm(t["content"])[:MATCH_CHARS]
        status = _norm(t["status"])
        status_words = {status, status.replace("_", " "), status.replace("_", "-")}
        if not any(content in line and any(s in line for s in status_words) for line in lines):
            todos.append(t)
    if todos:
        out["todos"] = todos
    files = [f for f in facts["files"] if _norm(f["path"]) not in hay]
    if files:
        out["files"] = files
    if facts["errors"]:
        last = facts["errors"][-1]
        if not (_has(hay, last["text"]) or any(_has(hay, part) for part in _ERROR_PARTS.split(last["text"])
                                                if len(part.strip()) >= MIN_ERROR_PART)):
            out["last_error"] = last
    return out


def _render_pinned(missing: dict[str, Any], files: list[dict[str, Any]]) -> str:
    out = [PINNED_HEADING,
           "Facts of the conversation the summary above left out, added by ctxcompact's check (quoted "
           "from the transcript):"]
    if missing.get("rules"):
        out.append("Rules and constraints (verbatim):")
        out += [f"- {r}" for r in missing["rules"]]
    if missing.get("latest_request"):
        out.append(f"Latest request (verbatim): {missing['latest_request']}")
    if missing.get("todos"):
        out.append("Open todos:")
        out += [f"- [{t['status']}] {shorten(t['content'], 300)}" for t in missing["todos"]]
    error = missing.get("last_error")
    if error:
        where = f"`{shorten(error['command'], 80)}`" if error.get("command") else error["tool"]
        state = "resolved" if error["resolved"] else "UNRESOLVED"
        out.append(f"Last error: [{state}] {where}: {shorten(error['text'], 240)}")
    if files:
        out.append("Files touched (most recent first):")
        out += [f"- {shorten(f['path'], 200)}" for f in reversed(files)]
    return "\n".join(out)


def pinned_block(missing: dict[str, Any], budget_tokens: int) -> tuple[str, list[dict[str, Any]]]:
    """The pinned-facts block within :data:`PINNED_SHARE` of ``budget_tokens``, dropping the least recent
    files first, and the files it kept."""
    limit = max(1, int(budget_tokens * PINNED_SHARE))
    files = list(missing.get("files") or [])
    text = _render_pinned(missing, files)
    while files and len(text) > limit * 4:
        files = files[max(1, len(files) // 4):] if len(files) > 8 else files[1:]
        text = _render_pinned(missing, files)
    text, _ = fit_summary(text, limit)
    return text, files


def check_summary(text: str, facts: dict[str, Any], records: Iterable[Record],
                  budget_tokens: int) -> tuple[SummaryCheck, str | None]:
    """Check an LLM's summary ``text`` against ``facts`` (:func:`.extractive.extract_facts` of the same
    request). Returns the verdict and, when facts are missing, the pinned-facts block to append."""
    body = text.strip()
    if not body:
        return SummaryCheck("rejected", list(SECTIONS), reason="the summary is empty"), None
    found = sections_in(body)
    missing_sections = [s for s in SECTIONS if s not in found]
    if not found:
        return SummaryCheck("rejected", missing_sections,
                            reason="the summary has none of the sections the prompt asks for"), None
    terms = distinctive_terms(records, facts)
    hay = _norm(body)
    if len(terms) >= 3 and not any(t in hay for t in terms):
        return SummaryCheck("rejected", missing_sections,
                            reason="the summary is off-topic (it names nothing of the conversation)"), None
    missing = _missing(body, facts)
    if not missing:
        return SummaryCheck("passed", missing_sections), None
    block, files = pinned_block(missing, budget_tokens)
    added: dict[str, int] = {}
    for kind in ("rules", "latest_request", "todos", "last_error"):
        if missing.get(kind):
            added[kind] = len(missing[kind]) if isinstance(missing[kind], list) else 1
    if files:
        added["files"] = len(files)
    return SummaryCheck("amended", missing_sections, added), block
