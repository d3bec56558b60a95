"""A compaction written into a Claude Code log the way Claude Code writes its own
(docs/guides/claude-code-codex.md): the log's lines as read, a ``compact_boundary`` line, the context after it
(copies under fresh uuids and message ids, usage zeroed), each line ctxcompact makes chained into the
``parentUuid`` tree in its session."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid as uuidlib
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from ..model import Origin, Record, Role
from .claude_code_tree import in_main_session_sidechain

#: how Claude Code opens its own compact summary (CLI 2.1.39, the spotter compact excerpt)
COMPACT_SUMMARY_OPENING = ("This session is being continued from a previous conversation that ran out of "
                           "context. The summary below covers the earlier portion of the conversation.")


def copy_message_id(original: str) -> str:
    """The ``message.id`` of a kept line's copy after a boundary: derived from the original (the same input
    gives the same output), distinct from it, shaped like the provider's (``msg_`` and base62)."""
    digest = int.from_bytes(hashlib.sha256(f"ctxcompact-copy:{original}".encode()).digest()[:16], "big")
    chars = []
    while digest:
        digest, r = divmod(digest, 62)
        chars.append(_BASE62[r])
    return "msg_" + "".join(chars).rjust(22, "0")


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def compact_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """``compactMetadata`` as Claude Code 2.1.x writes it: the trigger, the size before and (newer builds)
    after, which its meter falls back on when no usage follows the boundary."""
    out: dict[str, Any] = {"trigger": "auto", "preTokens": meta.get("pre_tokens", 0)}
    if isinstance(meta.get("post_tokens"), int):
        out["postTokens"] = meta["post_tokens"]
    return out


def zeroed(usage: Any) -> Any:
    if not isinstance(usage, dict):
        return usage
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {**usage, **{k: 0 for k in keys if k in usage}}


#: the envelope fields a made line copies from the line it follows (the session it belongs to)
SESSION_FIELDS = ("userType", "cwd", "sessionId", "version", "gitBranch", "slug")


def made_envelope(prev: dict[str, Any] | None, parent: str | None, salt: int,
                  timestamp: str | None = None) -> dict[str, Any]:
    """The envelope of a line ctxcompact makes: chained on ``parent``, in ``prev``'s session. The uuid is
    derived from the parent and the position (the same input gives the same output, run after run)."""
    prev = prev or {}
    env: dict[str, Any] = {"parentUuid": parent, "isSidechain": False}
    env.update({k: prev[k] for k in SESSION_FIELDS if k in prev})
    if prev.get("isSidechain") is True and isinstance(prev.get("agentId"), str):  # a subagent's own log
        env.update({"isSidechain": True, "agentId": prev["agentId"]})
    env["type"] = "user"
    seed = f"{prev.get('sessionId', '')}:{parent}:{salt}"
    env["uuid"] = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "ctxcompact:" + seed))
    env["timestamp"] = timestamp or prev.get("timestamp") or now()
    return env


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Seen:
    """What a compaction takes of the log's lines (``Format.compaction_seen``): the last line of the main
    chain (the made lines hang from it, in its session) and how many lines there are (the made lines' uuids
    are seeded by their place in the output)."""

    def __init__(self) -> None:
        self.prev: dict[str, Any] | None = None
        self.lines = 0

    def add(self, data: Any, raw: bytes | None) -> None:
        self.lines += 1
        if isinstance(data, dict) and isinstance(data.get("uuid"), str) and not in_main_session_sidechain(
                data):
            self.prev = data


def compaction_appended(seen: Seen, records: list[Record], pre_tokens: int,
                        post_tokens: int | None = None) -> list[Record]:
    """What a compaction writes after the log's lines: a ``compact_boundary`` line, then the context the
    model now sees: summaries as ``isCompactSummary`` lines, kept messages as copies under fresh uuids, each
    chained by :func:`link_records` after the log's last line (so they are written as they are).

    Claude Code's meter (``/context``, its auto-compact trigger) takes the last assistant usage after the
    last boundary, skipping usage whose input is 0, and estimates the lines after it. So the copies' usage
    is zeroed (as Claude Code zeroes a preserved segment's) and the meter counts the compacted context
    afresh; the originals before the boundary keep what the provider billed. A copy also gets a fresh
    ``message.id`` (one per original id, so the lines of one response stay one response): Claude Code
    merges the lines that share an id, and a copy under its original's id sent its blocks twice."""
    boundary = Record(index=-1, line=0, raw=None, data=None, origin=Origin.SUMMARY, dirty=True,
                      meta={"compact_boundary": True, "pre_tokens": pre_tokens,
                            "post_tokens": post_tokens})
    after: list[Record] = []
    for rec in records:
        message = rec.message
        if message is None:
            continue  # progress, snapshots: already in the history
        if rec.raw is None and rec.data is None:
            if rec.origin is Origin.SUMMARY and message.role is Role.USER:
                rec = dataclasses.replace(rec, meta={**rec.meta, "compact_summary": True,
                                                     "injected": True})
            after.append(rec)
            continue
        data = dict(rec.data) if isinstance(rec.data, dict) else {}
        for key in ("uuid", "parentUuid", "logicalParentUuid", "isSidechain", "timestamp"):
            data.pop(key, None)
        extra = dict(message.extra)
        if extra.get("usage") is not None:
            extra["usage"] = zeroed(extra["usage"])
        if isinstance(extra.get("id"), str):
            extra["id"] = copy_message_id(extra["id"])
        if extra != message.extra:
            message = dataclasses.replace(message, extra=extra)
        after.append(dataclasses.replace(rec, raw=None, data=data, message=message, dirty=True,
                                         meta={**rec.meta, "copy": True}))
    return link_records([boundary, *after], seen.prev, seen.lines)


def link_records(records: list[Record], prev: dict[str, Any] | None = None, at: int = 0) -> list[Record]:
    """Made records (no input line) are inserted into the ``parentUuid`` chain after the chained line
    before them: a fresh uuid, that line as parent, its session fields and timestamp; the later lines that
    hung off that line hang off the made one instead, so the chain stays one line longer, not forked. A
    record linked once is left as it is (``meta["linked"]``). ``prev``: the envelope of the last chained
    main-chain line before them; ``at``: how many lines come before them (a made line's uuid is seeded by
    its place in the output)."""
    out: list[Record] = []
    moved: dict[str, str] = {}  # old parent uuid -> the made line inserted after it
    for rec in records:
        data = rec.data if isinstance(rec.data, dict) else None
        if rec.raw is None and (data is None or rec.meta.get("copy")) and not rec.meta.get("linked"):
            parent = prev.get("uuid") if prev else None
            env = made_envelope(prev, parent, at + len(out))
            if rec.meta.get("compact_boundary"):
                env = {**env, "parentUuid": None, "logicalParentUuid": parent, "type": "system",
                       "subtype": "compact_boundary", "content": "Conversation compacted",
                       "isMeta": False, "level": "info",
                       "compactMetadata": compact_metadata(rec.meta)}
            elif data is not None:  # a kept line copied after a boundary: its own fields, a new place
                env = {**data, **env, "type": data.get("type", env["type"])}
            if rec.meta.get("compact_summary"):
                env.update({"isVisibleInTranscriptOnly": True, "isCompactSummary": True})
            if parent is not None and not rec.meta.get("compact_boundary"):
                moved[parent] = env["uuid"]
            rec = dataclasses.replace(rec, data=env, dirty=True, meta={**rec.meta, "linked": True})
            data = env
        elif data is not None and data.get("parentUuid") in moved and not in_main_session_sidechain(data):
            data = {**data, "parentUuid": moved[data["parentUuid"]]}
            rec = dataclasses.replace(rec, data=data, dirty=True)
        if data is not None and isinstance(data.get("uuid"), str) and not in_main_session_sidechain(data):
            prev = data
        out.append(rec)
    return out


def link_converted(objs: Iterator[Any]) -> Iterator[Any]:
    """Lines converted from another format: one new session, each line the child of the one before."""
    session = str(uuidlib.uuid4())
    prev: dict[str, Any] | None = {"sessionId": session, "cwd": os.getcwd(), "userType": "external"}
    for i, obj in enumerate(objs):
        env = made_envelope(prev, prev.get("uuid") if prev else None, i, timestamp=now())
        obj = {**env, **{k: v for k, v in obj.items() if k not in env or k in ("type",)}}
        obj["timestamp"] = env["timestamp"]
        prev = obj
        yield obj
