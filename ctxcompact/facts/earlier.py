"""Earlier summaries: what an agent, a framework or ctxcompact itself already summarized (docs/concepts/
handoff.md#earlier-summaries). They are the most valuable input of a compaction: everything before them is
gone from the transcript. Each format's parser flags the records that carry one
(:data:`~ctxcompact.model.EARLIER_SUMMARY`, :data:`~ctxcompact.model.OPAQUE_SUMMARY`); ctxcompact's own
summary is recognised by where ctxcompact puts its marker (the whole first line of a user message), never by
how a person's text starts. The summary carries every readable one forward verbatim (an "Earlier summary"
part with priority over the rest); an encrypted one is kept in the context as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import EARLIER_SUMMARY, OPAQUE_SUMMARY, Message, OpaqueBlock, Origin, Record, Role, TextBlock
from .text import SUMMARY_MARKER, is_ours_summary


@dataclass(frozen=True, slots=True)
class EarlierSummary:
    source: str  # who wrote it: "claude-code", "codex", "adk", "anthropic", "openai", "ctxcompact"
    text: str  # its readable text ("" when opaque)
    opaque: bool = False


def _readable(rec: Record) -> str:
    msg = rec.message
    if msg is None:
        return ""
    parts: list[str] = []
    for b in msg.blocks:
        if isinstance(b, TextBlock) and b.text.strip():
            parts.append(b.text.strip())
        elif isinstance(b, OpaqueBlock) and isinstance(b.raw, dict):
            content = b.raw.get("content")  # an Anthropic compaction block's readable summary
            if b.kind == "compaction" and isinstance(content, str) and content.strip():
                parts.append(content.strip())
    return "\n\n".join(parts)


def earlier_summary(rec: Record) -> EarlierSummary | None:
    """The earlier summary ``rec`` carries, or None. ctxcompact's own records (from the state) are not
    counted here: the state hands their text to the summarizer as the prior summary."""
    if rec.origin is not Origin.INPUT:
        return None
    source = rec.meta.get(EARLIER_SUMMARY)
    msg = rec.message
    if not isinstance(source, str):
        if msg is None or msg.role is not Role.USER:
            return None
        first = next((b for b in msg.blocks if isinstance(b, TextBlock)), None)
        if first is None or not is_ours_summary(first.text):
            return None
        source = "ctxcompact"  # a framework wrote ctxcompact's summary into its own history
    text = _readable(rec)
    if SUMMARY_MARKER in text.split("\n"):
        source = "ctxcompact"
    return EarlierSummary(source, text, opaque=bool(rec.meta.get(OPAQUE_SUMMARY)))


def earlier_summaries(records: Sequence[Record]) -> list[EarlierSummary]:
    """Every earlier summary in ``records``, oldest first."""
    return [s for s in (earlier_summary(r) for r in records) if s is not None]


def carried_text(records: Sequence[Record], prior: str | None = None) -> str | None:
    """The readable earlier summaries of ``records`` as one text, oldest first, each verbatim; one already
    inside ``prior`` (the state's summary, which the output carried into the log) is not repeated."""
    return carried(earlier_summaries(records), prior)


def carried(found: Sequence[EarlierSummary], prior: str | None = None) -> str | None:
    """:func:`carried_text` of the earlier summaries found (:func:`earlier_summary` of each record)."""
    texts: list[str] = []
    for s in found:
        body = s.text.strip()
        if not body or (prior and _body(prior) and _body(prior) in body) or body in texts:
            continue
        texts.append(body)
    return "\n\n".join(texts) if texts else None


def _body(text: str) -> str:
    """A summary without its marker line: what a log that carried it holds of it."""
    lines = text.strip().split("\n")
    if lines and lines[0].strip() == SUMMARY_MARKER:
        lines = lines[1:]
    return "\n".join(lines).strip()[:2000]


def opaque_records(records: Sequence[Record]) -> list[Record]:
    """The records carrying an encrypted earlier summary: kept in the context as they are. One nested in a
    readable earlier summary (a ``compaction`` item inside a Codex ``replacement_history``) comes out as a
    record of its own (no line: the output format writes the item as it was), so the readable part is
    summarized and carried while the encrypted one is kept, never dropped."""
    return [o for r in records for o in opaque_of(r)]


def opaque_of(r: Record) -> list[Record]:
    """:func:`opaque_records` of one record: ``[r]`` itself when it is an encrypted summary, the encrypted
    parts nested in it as records of their own, or nothing."""
    if r.origin is not Origin.INPUT or not r.meta.get(EARLIER_SUMMARY) or r.message is None:
        return []
    if r.meta.get(OPAQUE_SUMMARY):
        return [r]
    return [dataclasses.replace(r, raw=None, data=None, dirty=True, usage=None,
                                message=Message(Role.ASSISTANT, [b], source_role="compaction"),
                                meta={EARLIER_SUMMARY: "openai", OPAQUE_SUMMARY: True})
            for b in r.message.blocks
            if isinstance(b, OpaqueBlock) and b.kind == "compaction" and isinstance(b.raw, dict)
            and "encrypted_content" in b.raw]


#: how much earlier-summary text the facts keep (the newest part when more; the summary fits its budget)
MAX_EARLIER_CHARS = 64_000
#: the length each instruction in force is kept to
MAX_INSTRUCTION_CHARS = 20_000
