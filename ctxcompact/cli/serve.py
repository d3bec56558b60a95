"""``ctxcompact mcp``: the MCP server command (docs/guides/frameworks.md#mcp-server)."""

from __future__ import annotations

from .commands import cli
from .options import EXIT_CODES


@cli.command(epilog=EXIT_CODES)
def mcp() -> None:
    """Serve ctxcompact's tools over MCP on stdin/stdout (needs the mcp extra: pip install 'ctxcompact[mcp]'):
    estimate_transcript, compact_transcript, and recall (search what a summary replaced, with line numbers).

    \b
    Example (Claude Code):
      claude mcp add ctxcompact -- ctxcompact mcp
    """
    from ..mcp_server import serve

    serve()
