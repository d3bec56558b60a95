"""Generated Claude Code sessions and Codex rollouts shaped as the clients write them, shared by the tests of
both formats' outputs (tests/formats) and their layout checks."""

from __future__ import annotations

from typing import Any

import orjson


def cc(uuid: str, parent: str | None, kind: str, content: Any, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/p",
                         "sessionId": "s1", "version": "2.1.39", "type": kind,
                         "message": {"role": kind, "content": content}, "uuid": uuid,
                         "timestamp": "2026-01-01T00:00:00.000Z"}
    d.update(kw)
    return d


def long_session(turns: int = 12, chars: int = 3000) -> list[dict[str, Any]]:
    """A Claude Code session of ``turns`` requests, each a call and a big result, with progress lines."""
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    for t in range(turns):
        u, a, p, r, f = (f"u{t}", f"a{t}", f"p{t}", f"r{t}", f"f{t}")
        lines.append(cc(u, parent, "user", f"request {t}: read file {t}"))
        lines.append(cc(a, u, "assistant", [{"type": "tool_use", "id": f"t{t}", "name": "Read",
                                             "input": {"file_path": f"/p/f{t}.py"}}], requestId=f"q{t}"))
        lines[-1]["message"]["id"] = f"m{t}"
        lines.append({"parentUuid": a, "isSidechain": False, "sessionId": "s1", "type": "progress",
                      "uuid": p, "data": {"type": "hook_progress"}, "timestamp": "2026-01-01T00:00:00.000Z"})
        lines.append(cc(r, a, "user", [{"type": "tool_result", "tool_use_id": f"t{t}",
                                        "content": f"contents {t} " + "y" * chars}],
                        toolUseResult={"type": "text", "file": {"filePath": f"/p/f{t}.py",
                                                                "content": "y" * chars}}))
        lines.append(cc(f, r, "assistant", [{"type": "text", "text": f"file {t} read"}], requestId=f"q{t}b"))
        lines[-1]["message"]["id"] = f"m{t}b"
        parent = f
    return lines


def rollout(turns: int = 10) -> list[dict[str, Any]]:
    def line(kind: str, payload: dict[str, Any], t: int, s: int) -> dict[str, Any]:
        return {"timestamp": f"2026-02-11T10:{t:02d}:{s:02d}.000Z", "type": kind, "payload": payload}

    out = [line("session_meta", {"id": "019c", "timestamp": "2026-02-11T10:00:00.000Z", "cwd": "/w",
                                 "originator": "codex_cli_rs", "cli_version": "0.66.0", "instructions": None},
                0, 0)]
    for t in range(turns):
        out.append(line("response_item", {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": f"request {t}"}]}, t, 1))
        out.append(line("response_item", {"type": "function_call", "name": "shell", "call_id": f"c{t}",
                                          "arguments": orjson.dumps({"command": ["cat", f"f{t}"]}).decode()},
                        t, 2))
        out.append(line("response_item", {"type": "function_call_output", "call_id": f"c{t}",
                                          "output": "z" * 3000}, t, 3))
        out.append(line("response_item", {"type": "message", "role": "assistant",
                                          "content": [{"type": "output_text", "text": f"done {t}"}]}, t, 4))
    return out
