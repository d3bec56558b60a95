"""The structural check every Claude Code output of ctxcompact must pass (issue 15): it validates as
``claude-code``; no tool result is orphaned and no ``parentUuid`` dangles that was not so in the input (an
excerpt may start mid-session); the uuid tree has as many roots as the input's (plus what a compaction adds
by design); every thinking signature and ``redacted_thinking`` payload of a line kept from the input is
unchanged."""

from __future__ import annotations

from typing import Any

import orjson

from ctxcompact.api import validate


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


def roots(objs: list[dict[str, Any]]) -> int:
    """Lines of the uuid tree with no parent in the file (null or pointing outside it)."""
    uuids = {o["uuid"] for o in objs if isinstance(o.get("uuid"), str)}
    return sum(1 for o in objs if isinstance(o.get("uuid"), str) and o.get("parentUuid") not in uuids)


def dangling(objs: list[dict[str, Any]]) -> set[str]:
    uuids = {o["uuid"] for o in objs if isinstance(o.get("uuid"), str)}
    return {o["parentUuid"] for o in objs
            if isinstance(o.get("parentUuid"), str) and o["parentUuid"] not in uuids}


def orphans(objs: list[dict[str, Any]]) -> list[str]:
    """Tool results of main-chain lines that answer no earlier tool_use."""
    seen: set[str] = set()
    out: list[str] = []
    for o in objs:
        if o.get("isSidechain") is True:
            continue
        content = (o.get("message") or {}).get("content") if isinstance(o.get("message"), dict) else None
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                seen.add(b["id"])
            elif b.get("type") == "tool_result" and b.get("tool_use_id") not in seen:
                out.append(b.get("tool_use_id"))
    return out


def thinking(objs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """uuid -> the thinking blocks of that line (text, signature, redacted data)."""
    out: dict[str, list[Any]] = {}
    for o in objs:
        msg = o.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        kinds = ("thinking", "redacted_thinking")
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") in kinds] \
            if isinstance(content, list) else []
        if blocks and isinstance(o.get("uuid"), str):
            out[o["uuid"]] = blocks
    return out


def check_claude_code_output(inp: bytes, out: bytes, *, added_roots: int = 0) -> list[dict[str, Any]]:
    """Assert the structure of a Claude Code output against its input; returns the output's lines."""
    report = validate(out)
    assert report.format == "claude-code", report.format
    assert report.ok, [str(p) for p in report.errors()]
    before, after = lines_of(inp), lines_of(out)
    # an excerpt may start after a call whose result it holds: only new orphans count
    assert set(orphans(after)) <= set(orphans(before)), set(orphans(after)) - set(orphans(before))
    assert dangling(after) <= dangling(before), dangling(after) - dangling(before)
    assert roots(after) == roots(before) + added_roots, (roots(before), roots(after))
    kept, now = thinking(before), thinking(after)
    for uuid, blocks in now.items():
        if uuid in kept:
            assert blocks == kept[uuid], uuid
    return after
