"""``ctxcompact mcp``: an MCP server on stdio (docs/guides/frameworks.md#mcp-server), on the official ``mcp``
package (the ``mcp`` extra). Three tools, each a thin call of the library API:

- ``estimate_transcript``: the estimate of a transcript file (tokens, calibration, budget, decision);
- ``compact_transcript``: ``run`` on a file, the output written where asked, the state beside the input;
  the continuation names the file and the lines the summary replaced;
- ``recall``: search what a summary replaced (text or regular expression), with line numbers.

Errors the user can cause come back as tool errors with the same messages as the CLI's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import __version__, api
from .errors import CtxCompactError, UsageError


def _options(window: int | None, model: str | None, format: str, state: str | None) -> api.Options:
    return api.Options(window=window, model=model, format=format,
                       state_path=Path(state) if state else None, cite_source=True)


def estimate_transcript(path: str, window: int | None = None, model: str | None = None,
                        format: str = "auto", state: str | None = None) -> dict[str, Any]:
    """Estimate a transcript file (JSONL): its tokens as the provider will count them, the window, the
    threshold and whether a compaction is due. Reads the state beside the file, writes nothing."""
    return api.estimate(path, _options(window, model, format, state)).to_json()


def compact_transcript(path: str, output: str, window: int | None = None, model: str | None = None,
                       format: str = "auto", state: str | None = None) -> dict[str, Any]:
    """Compact a transcript file (JSONL) when it is over the threshold and write the result to `output`
    (the input is never changed; the state goes beside the input, or to `state`). The continuation names
    the file and the lines the summary replaced; `recall` searches them."""
    out = Path(output)
    if out.resolve() == Path(path).resolve():
        raise UsageError("compact_transcript: output must not be the input (the input is never rewritten)")
    result = api.run(path, _options(window, model, format, state), output=out)
    summary = result.summary
    return {"compacted": result.compacted, "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after, "output": str(out),
            "state": str(result.state_path) if result.state_path else None,
            "exit_code": int(result.exit_code), "warnings": result.warnings,
            "summary": summary.text if summary is not None else None}


def recall(path: str, query: str, regex: bool = False, state: str | None = None,
           max_results: int = 20) -> dict[str, Any]:
    """Search the original messages that a compaction's summary replaced in a transcript file: `query` is
    case-insensitive text, or a regular expression with `regex`. Returns the matching messages (excerpts)
    with their line numbers in the file, oldest first, and how many more matched."""
    return api.recall(path, query, regex=regex, state_path=state, max_results=max_results).to_json()


TOOLS = (estimate_transcript, compact_transcript, recall)


def _guarded(fn: Any, tool_error: type[Exception]) -> Any:
    import functools

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CtxCompactError as exc:  # the CLI's message, as a tool error the client shows
            raise tool_error(str(exc)) from None
    return call


def build_server() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise UsageError("ctxcompact mcp needs the mcp package (2 or later): pip install 'ctxcompact[mcp]'") \
            from None
    server = MCPServer("ctxcompact", version=__version__,
                       instructions="Estimate and compact agent transcripts (JSONL); recall what a "
                                    "compaction's summary replaced, with line numbers.")
    for fn in TOOLS:
        server.tool()(_guarded(fn, ToolError))
    return server


def serve() -> None:
    """Run the server on stdin/stdout until the client closes it."""
    build_server().run("stdio")
