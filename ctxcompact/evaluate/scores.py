"""What a compacted context kept of the original, scored offline by exact string match
(docs/guides/eval.md#what-it-reports): the latest request, the user's rules, the open todos, the last error
and its status, the identifiers of the part replaced, the user's probes, and whether the result is valid."""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..convert import lines_in
from ..facts.outcomes import errors_seen
from ..facts.rules import user_rules
from ..facts.text import latest_request_record, typed_text
from ..facts.todos import open_todos
from ..model import Record, Transcript, token_text
from ..validate import live_calls
from ..validate import validate as validate_file
from .identifiers import KINDS, extract, squashed
from .probes import Probe

LOST_SHOWN = 20  # lost identifiers listed in the report (the counts cover all of them)


def _texts(rec: Record) -> list[str]:
    return token_text(rec.message)[0] if rec.message is not None else []


@dataclass(slots=True)
class Compared:
    """The original records, the compacted context, and which original records it kept unchanged."""

    original: list[Record]
    compacted: Transcript
    text: str  # everything the model sees in the compacted context
    flat: str  # the same, whitespace runs as one space
    replaced: list[Record]  # original message records not in the compacted context as they were

    def has(self, needle: str) -> bool:
        return bool(needle) and (needle in self.text or squashed(needle) in self.flat)

    def kept(self, rec: Record) -> bool:
        """The original record ``rec`` is in the compacted context as it was."""
        return rec.message is not None and id(rec) not in {id(r) for r in self.replaced}


def compare(original: Sequence[Record], compacted: Transcript) -> Compared:
    """Pair records by content: an original record is kept when the compacted context holds a record with the
    same token-bearing text, each such record pairing with one original (a masked result is not kept: its
    content was replaced). Content, not position, so the written output of any format pairs: an append-only
    log rewritten after its compaction line, a context rebuilt from a Codex ``replacement_history``."""
    available = Counter(tuple(_texts(r)) for r in compacted.records if r.message is not None)
    replaced = []
    for r in original:
        if r.message is None:
            continue
        key = tuple(_texts(r))
        if available[key] > 0:
            available[key] -= 1
        else:
            replaced.append(r)
    text = "\n".join(t for r in compacted.records for t in _texts(r))
    return Compared(list(original), compacted, text, squashed(text), replaced)


def latest_request_score(c: Compared) -> dict[str, Any]:
    """The latest request is kept when its text is in the compacted context, or the record that carries it
    is kept as it was (a slash command is written as its tags, not as the text a person reads)."""
    rec = latest_request_record(c.original)
    text = typed_text(rec) if rec is not None else None
    kept = None if text is None else (text in c.text or (rec is not None and c.kept(rec)))
    return {"text": text, "kept_verbatim": kept}


def rules_score(c: Compared) -> dict[str, Any]:
    rules = user_rules(c.original)
    lost = [r for r in rules if r not in c.text]
    return {"found": len(rules), "kept_verbatim": len(rules) - len(lost), "lost": lost}


def _line_with(c: Compared, needle: str, *words: str) -> bool:
    """A line of the compacted context holding ``needle`` and every word of ``words`` (case-insensitive)."""
    for line in c.text.splitlines():
        if needle in line and all(w.lower() in line.lower() for w in words):
            return True
    return False


def todos_score(c: Compared) -> dict[str, Any]:
    """An open todo is kept when one line holds its text and its status (a summary's `- [pending] …`, or
    the todo tool's call kept as it was)."""
    items = [
        {"content": t.content, "status": t.status, "kept": _line_with(c, t.content, t.status)}
        for t in open_todos(c.original)
    ]
    return {"open": len(items), "kept": sum(i["kept"] for i in items), "items": items}


_UNRESOLVED = re.compile(r"\b(?:unresolved|not (?:yet )?(?:fixed|resolved)|still fail\w*|open)\b", re.I)
_RESOLVED = re.compile(r"\b(?:resolved|fixed|passe[sd]|succeeded)\b", re.I)


def errors_score(c: Compared) -> dict[str, Any]:
    """The last error the original saw and whether the compacted context still says what became of it:
    the failed result kept as it was (with whatever resolved it), or a line holding the error's telling line
    that says resolved or unresolved as the original does."""
    errors = errors_seen(c.original)
    if not errors:
        return {"last": None, "status_kept": None}
    last = errors[-1]
    carrier = c.original[last.index]
    if carrier not in c.replaced:
        kept = not last.resolved or not any(
            r.index > carrier.index for r in c.replaced if r.message is not None
        )
    else:
        kept = False
        for line in c.text.splitlines():
            if last.text and last.text in line:
                says_open = bool(_UNRESOLVED.search(line))
                says_done = bool(_RESOLVED.search(_UNRESOLVED.sub("", line)))
                if (last.resolved and says_done and not says_open) or (not last.resolved and says_open):
                    kept = True
                    break
    return {
        "last": {"text": last.text, "tool": last.tool, "command": last.command, "resolved": last.resolved},
        "status_kept": kept,
    }


def identifiers_score(c: Compared) -> dict[str, Any]:
    found = extract(c.replaced, context=c.original)
    by_kind: dict[str, dict[str, int]] = {}
    lost: list[str] = []
    total = kept = 0
    for kind in KINDS:
        values = found.by_kind[kind]
        k = [v for v in values if c.has(v)]
        by_kind[kind] = {"total": len(values), "kept": len(k)}
        lost += [f"{kind}: {v}" for v in values if v not in k]
        total, kept = total + len(values), kept + len(k)
    return {
        "total": total,
        "kept": kept,
        "recall": round(kept / total, 4) if total else None,
        "by_kind": by_kind,
        "lost": lost[:LOST_SHOWN],
    }


def probes_score(c: Compared, probes: Sequence[Probe]) -> dict[str, Any]:
    """Each probe found in what the next call sees, and the same per category (uncategorised probes count
    under ``other``)."""
    missing = [p.label for p in probes if not p.found_in(c.text)]
    by_category: dict[str, dict[str, int]] = {}
    for p in probes:
        cat = by_category.setdefault(p.category or "other", {"total": 0, "found": 0})
        cat["total"] += 1
        cat["found"] += p.found_in(c.text)
    return {"total": len(probes), "found": len(probes) - len(missing), "missing": missing,
            "by_category": by_category}


def valid_score(transcript: Transcript, fmt: str | None = None) -> dict[str, Any]:
    """The compacted context validates as its format (schema and cross-record rules), and every tool call
    has its result and every result its call."""
    fmt = fmt or transcript.format  # what run writes: a format it cannot write faithfully writes its fallback
    data = b"".join(line + b"\n" for line in lines_in(transcript, fmt))
    report = validate_file(io.BytesIO(data), fmt)
    calls = {c.id for m in transcript.messages() for c in m.tool_calls()}
    results = {r.call_id for m in transcript.messages() for r in m.tool_results()}
    # a tree log's live calls (the running session's) are no missing results: the cleaner's rule
    unanswered = sorted(calls - results - live_calls(transcript, fmt))
    orphans = sorted(results - calls)
    problems = [str(p) for p in report.problems if p.severity == "error"][:10]
    problems += [f"call {i} has no result" for i in unanswered[:5]]
    problems += [f"result {i} has no call" for i in orphans[:5]]
    return {"valid": report.ok and not unanswered and not orphans, "problems": problems}


def score(
    original: Sequence[Record],
    compacted: Transcript,
    probes: Sequence[Probe] = (),
    fmt: str | None = None,
    *,
    validate: bool = True,
) -> dict[str, Any]:
    """Every score of one compacted context against the original records (``validate=False``: not whether
    it is a valid transcript, for a baseline that is only text)."""
    c = compare(original, compacted)
    out: dict[str, Any] = {
        "latest_request": latest_request_score(c),
        "rules": rules_score(c),
        "todos": todos_score(c),
        "errors": errors_score(c),
        "identifiers": identifiers_score(c),
        "probes": probes_score(c, probes) if probes else None,
    }
    out.update(valid_score(compacted, fmt) if validate else {"valid": None, "problems": []})
    return out
