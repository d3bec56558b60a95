"""The Claude Code log as a tree (``parentUuid``): which lines are the model's context (after the last
compaction boundary, on the active branch, not a subagent's line inside the main session), a dropped line's
children relinked past it, and one record per API message. The rules are in formats/claude_code.py's
docstring."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import orjson

from ..model import EARLIER_SUMMARY, SUBAGENT_MESSAGE, SUBAGENT_RUN, Origin, Record, Role, Usage

_UUID_KEY = re.compile(rb'"uuid"\s*:\s*"([^"\\]{1,200})"')
_PARENT_KEY = re.compile(rb'"parentUuid"\s*:\s*(?:"([^"\\]{1,200})"|null)')


def salvage_link(raw: bytes) -> tuple[str, str | None] | None:
    """(uuid, parentUuid) of a line that did not read as a record, or None when it names no uuid."""
    try:
        obj = orjson.loads(raw.decode("utf-8", "replace"))
    except (orjson.JSONDecodeError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        uuid, parent = obj.get("uuid"), obj.get("parentUuid")
        if isinstance(uuid, str):
            return uuid, parent if isinstance(parent, str) else None
        return None
    u, p = _UUID_KEY.search(raw), _PARENT_KEY.search(raw)
    if u is None:
        return None
    return u.group(1).decode("utf-8", "replace"), (p.group(1).decode("utf-8", "replace")
                                                   if p is not None and p.group(1) is not None else None)


def subagent_runs(records: list[Record]) -> None:
    """Sidechain lines with no ``agentId`` (CLI 1.0.x writes subagents into the main file) belong to the run
    of their root line (the ``parentUuid`` chain up to the subagent's prompt)."""
    parent = {r.meta["uuid"]: r.meta.get("parent_uuid") for r in records
              if SUBAGENT_MESSAGE in r.meta and "uuid" in r.meta and r.meta.get("type") != "progress"}
    for r in records:
        if SUBAGENT_RUN in r.meta or r.meta.get("uuid") not in parent:
            continue
        cur, seen = r.meta["uuid"], set()
        while parent.get(cur) in parent and cur not in seen:
            seen.add(cur)
            cur = parent[cur]
        r.meta[SUBAGENT_RUN] = cur


def in_main_session_sidechain(obj: dict[str, Any]) -> bool:
    """A subagent's line inside the main session's file (``isSidechain`` without ``agentId``, CLI 1.0.x).
    A subagent's own log marks every line ``isSidechain`` *with* its ``agentId``: those lines are that
    log's conversation (tests/data/claude-code/spotter-sidechain-agent.jsonl)."""
    return obj.get("isSidechain") is True and not isinstance(obj.get("agentId"), str)


def set_inactive(rec: Record, why: str) -> None:
    # Records are fresh from parse_line here (finish runs before anyone else sees them).
    rec.message = None
    rec.usage = None
    rec.meta["inactive"] = why


def relink_dropped(records: list[Record], dropped: Sequence[bytes]) -> None:
    """A dropped line's children hang from its parent instead (issue 26 item 5): the chain is followed
    from the last line back, so a gap would silently cut every line before it out of the context. The
    dropped line's ``uuid`` and ``parentUuid`` are read as far as they can be (invalid UTF-8 replaced,
    else the two keys found in the text); a line that names neither links nothing."""
    up: dict[str, str | None] = {}
    for raw in dropped:
        link = salvage_link(raw)
        if link is not None:
            up[link[0]] = link[1]
    if not up:
        return
    for rec in records:
        parent = rec.meta.get("parent_uuid")
        seen: set[str] = set()
        while isinstance(parent, str) and parent in up and parent not in seen:
            seen.add(parent)
            parent = up[parent]
        if seen:
            if parent is None:
                rec.meta.pop("parent_uuid", None)
            else:
                rec.meta["parent_uuid"] = parent


def finish(records: list[Record]) -> list[Record]:
    # Claude Code resumes from its last compaction boundary: what came before is history only.
    boundary = max((i for i, r in enumerate(records) if r.meta.get("compact_boundary")
                    and not in_main_session_sidechain(r.data)), default=-1)
    for r in records[: boundary + 1]:
        if r.message is not None:
            set_inactive(r, "compacted")
    live = records[boundary + 1:]
    subagent_runs(records)
    follow_branch(live)
    seen: set[tuple[str, str]] = set()
    for r in live:
        if r.usage is None:
            continue
        key = (r.meta.get("message_id", ""), r.meta.get("request_id", ""))
        if key != ("", ""):
            if key in seen:
                r.usage = None
            seen.add(key)
    if boundary >= 0:
        post_tokens(records[boundary], live)
    return records


def post_tokens(boundary: Record, live: list[Record]) -> None:
    """With no billed usage after the last boundary, its ``compactMetadata.postTokens`` (the compacted
    context's size, which Claude Code's meter falls back on too) measures the lines written with it
    (:func:`written_with`). Without it a log ctxcompact compacted was estimated at the default factor, far
    under its real size (the hidden prompt unknown)."""
    post = post_figure(boundary)
    if post is None or any(r.usage and r.usage.prompt_tokens > 0 for r in live):
        return
    stamp = boundary.meta.get("timestamp")
    written = [r for r in live if written_with(stamp, r)]
    target = written[-1] if written else boundary
    target.usage = post_usage(post)


def post_figure(boundary: Record) -> int | None:
    """A boundary's ``compactMetadata.postTokens``, if it records one."""
    meta = boundary.data.get("compactMetadata") if isinstance(boundary.data, dict) else None
    post = meta.get("postTokens") if isinstance(meta, dict) else None
    return post if isinstance(post, int) and post > 0 else None


def written_with(stamp: Any, rec: Record) -> bool:
    """Whether a message after a boundary stamped ``stamp`` was written with it: ctxcompact's summary and
    copies carry the boundary's timestamp, Claude Code's summary line is flagged ``isCompactSummary`` even
    when stamped a moment after its boundary (1 ms on spotter-auto-compact-excerpt-b: with the boundary as
    the target, postTokens was lost with it); a line the client wrote since is later."""
    return rec.message is not None and (
        rec.meta.get(EARLIER_SUMMARY) == "claude-code"
        or (isinstance(stamp, str) and str(rec.meta.get("timestamp", "~")) <= stamp))


def post_usage(post: int) -> Usage:
    """The usage a boundary's postTokens gives the last line written with it (it covers that line)."""
    return Usage(post, source="compactMetadata.postTokens", after=True)


def api_turns(records: list[Record]) -> list[Record]:
    """One record per API message: Claude Code writes a streamed response one content block per line
    (same ``message.id``), and a block can come after the result of its own message's tool_use (the
    tool ran while the response streamed on: thinking, redacted_thinking or text after a tool_use).
    The later lines' blocks join the first line of their message, in order, so the response is one
    assistant turn and the results follow it. Only tool results and message-less lines may lie between
    the lines joined; the log itself is never changed (Claude Code out writes the lines as they are)."""
    out: list[Record] = []
    open_at: dict[str, int] = {}  # message id -> index in out of its first line, while joinable
    joined = False
    for rec in records:
        msg = rec.message
        mid = rec.meta.get("message_id")
        if msg is None:
            out.append(rec)
            continue
        if msg.role is Role.ASSISTANT and isinstance(mid, str) and rec.origin is Origin.INPUT:
            if mid in open_at:
                head = out[open_at[mid]]
                assert head.message is not None
                blocks = [*head.message.blocks, *msg.blocks]
                out[open_at[mid]] = dataclasses.replace(
                    head, message=dataclasses.replace(head.message, blocks=blocks), dirty=True)
                joined = True
                continue
            open_at = {mid: len(out)}  # a new response: earlier ones can no longer be joined
        elif not msg.is_tool_result_only:
            open_at = {}
        out.append(rec)
    return out if joined else records


#: a chained line as the branch's rule reads it: uuid, parent uuid, message id, its calls' ids, its results'
#: call ids (None: a line with no message), whether it carries only tool results
Link = tuple[str, "str | None", "str | None", tuple[str, ...], "tuple[str, ...] | None", bool]


def link_of(rec: Record) -> Link:
    msg = rec.message
    mid = rec.meta.get("message_id")
    return (rec.meta["uuid"], rec.meta.get("parent_uuid"), mid if isinstance(mid, str) else None,
            tuple(c.id for c in msg.tool_calls()) if msg is not None else (),
            tuple(t.call_id for t in msg.tool_results()) if msg is not None else None,
            msg is not None and msg.is_tool_result_only)


def follow_branch(live: list[Record]) -> None:
    chained = [r for r in live if "uuid" in r.meta and r.meta.get("inactive") is None]
    off = off_branch([link_of(r) for r in chained])
    for r in chained:
        if r.message is not None and r.meta["uuid"] in off:
            set_inactive(r, "off_branch")


def off_branch(lines: Sequence[Link]) -> set[str]:
    """The uuids of the message lines off the active branch, of the chained lines after the last boundary, in
    order: the ancestors of the last line, widened to a fixpoint by the lines of the same API response
    (same message id) and the tool-result lines parented on a line of the branch answering its calls."""
    if not lines:
        return set()
    by_uuid = {line[0]: line for line in lines}
    active: set[str] = set()
    cur: Link | None = lines[-1]
    while cur is not None and cur[0] not in active:
        active.add(cur[0])
        parent = cur[1]
        cur = by_uuid.get(parent) if parent else None
    members = [line for line in lines if line[4] is not None]
    ids = {m[2] for m in members if m[0] in active and m[2] is not None}
    calls = {c for m in members if m[0] in active for c in m[3]}
    changed = True
    while changed:
        changed = False
        for m in members:
            if m[0] in active:
                continue
            results = m[4]
            assert results is not None
            if m[2] in ids or (m[5] and m[1] in active and all(t in calls for t in results)):
                active.add(m[0])
                if m[2] is not None:
                    ids.add(m[2])
                calls.update(m[3])
                changed = True
    return {m[0] for m in members if m[0] not in active}
