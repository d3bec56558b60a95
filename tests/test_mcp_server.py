"""`ctxcompact mcp`: the MCP server driven by the official mcp client over stdio (a real subprocess):
estimate a transcript, compact it (the continuation names the file and lines replaced), recall what the
summary replaced by text and by regex, with line numbers; errors come back as tool errors."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import assistant, coding_session, jsonl, sys_msg, tool, user

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

SECRET = "the staging database password rotates every Tuesday at 04:00 UTC"


def _log(path: Path) -> None:
    msgs = [sys_msg("You are a coding agent."), user("Set up the deploy. Note: " + SECRET + ".")]
    msgs += [assistant(None, [("c_env", "read_env", {"file": ".env.staging"})]),
             tool("c_env", "DB_HOST=staging-db-7.internal\nDB_PORT=6543\nDB_PASSWORD=hunter2-staging\n"),
             assistant("The staging host is staging-db-7.internal on port 6543.")]
    msgs += coding_session(40)
    msgs.append(user("Now write the deploy script."))
    path.write_bytes(jsonl(msgs))


async def _session(tmp: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxcompact", "mcp"], cwd=str(tmp))
    out: dict[str, Any] = {}
    async with Client(params) as client:
        tools = await client.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)

        async def call(name: str, **args: Any) -> Any:
            result = await client.call_tool(name, args)
            if result.is_error:
                return ("error", " ".join(getattr(c, "text", "") for c in result.content))
            return result.structured_content if result.structured_content is not None else \
                orjson.loads(result.content[0].text)

        log = str(tmp / "log.jsonl")
        out["before_recall"] = await call("recall", path=log, query="password")
        out["estimate"] = await call("estimate_transcript", path=log, window=8000)
        out["compact"] = await call("compact_transcript", path=log, output=str(tmp / "out.jsonl"),
                                    window=8000)
        out["text"] = await call("recall", path=log, query="PASSWORD rotates")
        out["regex"] = await call("recall", path=log, query=r"staging-db-\d+\.internal", regex=True,
                                  max_results=1)
        out["none"] = await call("recall", path=log, query="no such words anywhere")
        out["bad_regex"] = await call("recall", path=log, query="([unclosed", regex=True)
        out["missing"] = await call("estimate_transcript", path=str(tmp / "nope.jsonl"))
        out["same"] = await call("compact_transcript", path=log, output=log)
    return out


def test_mcp_server_over_stdio(tmp_path: Path) -> None:
    _log(tmp_path / "log.jsonl")
    before = (tmp_path / "log.jsonl").read_bytes()
    out = asyncio.run(asyncio.wait_for(_session(tmp_path), 120))
    assert out["tools"] == ["compact_transcript", "estimate_transcript", "recall"]
    assert out["before_recall"][0] == "error" and "no summary covers" in out["before_recall"][1]
    est = out["estimate"]
    assert est["would_compact"] is True and est["tokens"]["calibrated"] > 8000 * 0.5
    comp = out["compact"]
    assert comp["compacted"] and comp["tokens_after"] < comp["tokens_before"] and comp["exit_code"] == 0
    assert (tmp_path / "log.jsonl").read_bytes() == before  # the input is never changed
    written = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    lines = before.count(b"\n")
    continuation = written[-1]["content"]
    assert f"{tmp_path / 'log.jsonl'}, lines 1-{lines}" in continuation and "recall" in continuation
    hits = out["text"]["hits"]
    assert [h["line"] for h in hits] == [2] and SECRET in hits[0]["text"] and hits[0]["role"] == "user"
    assert out["text"]["covered_lines"] == lines
    regex = out["regex"]
    assert [h["line"] for h in regex["hits"]] == [4] and regex["more"] == 1  # the result, then the answer
    assert "staging-db-7.internal" in regex["hits"][0]["text"]
    assert "hunter2" not in orjson.dumps(out).decode()  # credentials are masked in what recall returns
    assert out["none"]["hits"] == [] and out["none"]["more"] == 0
    assert out["bad_regex"][0] == "error" and "not a regular expression" in out["bad_regex"][1]
    assert out["missing"][0] == "error" and "no such file" in out["missing"][1]
    assert out["same"][0] == "error" and "must not be the input" in out["same"][1]


def test_recall_edges(tmp_path: Path) -> None:
    from ctxcompact import api
    from ctxcompact.errors import StateError, UsageError

    log = tmp_path / "log.jsonl"
    _log(log)
    api.run(log, api.Options(window=8000), output=tmp_path / "o.jsonl")
    long_text = api.recall(log, "handle_", max_results=500, excerpt_chars=10)
    assert len(long_text.hits) == 100 and long_text.more > 0  # bounded
    assert all(len(h.text) <= 82 for h in long_text.hits)
    unicode = api.recall(log, "DEPLOY")  # case-insensitive
    assert unicode.hits and all(h.line <= long_text.covered_lines for h in unicode.hits)
    with pytest.raises(UsageError, match="1 to 1000"):
        api.recall(log, "")
    log.write_bytes(b'{"role":"user","content":"rewritten"}\n' + log.read_bytes()[40:])
    with pytest.raises(StateError):
        api.recall(log, "deploy")  # the file no longer starts with what the summary covers
