"""What a compaction of a Codex rollout takes of the rollout's lines, line by line
(``Format.compaction_seen``, ``formats.jsonl.compaction_output``; both routes feed it): the user's latest
request, the usage to carry, the context blocks Codex writes at a turn's start, and whether the client that
resumes the rollout sends that context again after the ``compacted`` line ctxcompact writes
(:meth:`Seen.resends`); if not, the latest context to keep (:meth:`Seen.restored`)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                      "<turn_aborted>", "<user_shell_command>", "<permissions instructions>")
#: the injected user messages Codex writes with its instructions at a turn's start (a context block)
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
#: the first Codex that sends its context afresh after resuming a ``compacted`` line it did not write
#: (tests/clients, CTXCOMPACT_CODEX_VERSION: 0.87, 0.90 … 0.171 do; 0.59 … 0.80, the first that read
#: ``replacement_history``, do not; docs/guides/claude-code-codex.md)
RESENDS_FROM = (0, 87)
_VERSION = re.compile(r"(\d+)\.(\d+)")


class Seen:
    """What a Codex compaction (``jsonl.compaction_output``) takes from the input's lines: the last
    timestamp, the user's latest request (raw line, payload), the context items Codex re-sends on resume
    (:meth:`resent`) and what says whether it will (:meth:`resends`), the last usage record and the last
    ``token_count`` info."""

    def __init__(self) -> None:
        self.stamp: str | None = None
        self.request: tuple[bytes, dict[str, Any]] | None = None
        self.usage_record: Any = None
        self.info: dict[str, Any] | None = None
        #: digests of the lines of the context blocks closed so far, and of the block being read (marked:
        #: it holds an ``<environment_context>`` or ``additional_tools`` item)
        self.context: set[bytes] = set()
        self.block: list[bytes] = []
        self.marked = False
        #: the newest ``session_meta.cli_version`` (major, minor); whether the block being read holds a
        #: developer message, and whether a marked block closed so far did (:meth:`resends`)
        self.version: tuple[int, int] | None = None
        self.developer = False
        self.newer = False
        #: the latest injected context item of each kind (environment, AGENTS.md, user instructions), in the
        #: order they were last written (:meth:`restored`)
        self.latest: dict[str, tuple[bytes, dict[str, Any]]] = {}

    def add(self, data: Any, raw: bytes) -> None:
        if not isinstance(data, dict):
            return
        if isinstance(data.get("timestamp"), str):
            self.stamp = data["timestamp"]
        p = data.get("payload")
        if not isinstance(p, dict):
            return
        kind = data.get("type")
        if kind == "session_meta":
            m = _VERSION.match(str(p.get("cli_version")))
            version = (int(m.group(1)), int(m.group(2))) if m else None
            if version is not None and (self.version is None or version > self.version):
                self.version = version
        elif kind == "token_usage_record":
            self.usage_record = p
        elif kind == "event_msg" and p.get("type") == "token_count" and isinstance(p.get("info"), dict):
            self.info = p["info"]
        elif kind in ("response_item", "compacted"):
            context = kind == "response_item" and self._context(p)
            if context:
                self.block.append(_digest(raw))
                self.marked = self.marked or context == "marker"
                self.developer = self.developer or (p.get("type") == "message"
                                                    and p.get("role") == "developer")
                if p.get("role") == "user":
                    text = _text(p).lstrip()
                    kind = next(k for k in _CONTEXT_PREFIXES if text.startswith(k))
                    self.latest.pop(kind, None)
                    self.latest[kind] = (raw, p)
                return
            self._close()
            if kind == "response_item" and p.get("type") == "message" and p.get("role") == "user":
                text = _text(p)
                if text.strip() and not text.lstrip().startswith(INJECTED_PREFIXES):
                    self.request = (raw, p)

    @staticmethod
    def _context(p: dict[str, Any]) -> str | None:
        """``marker`` for the items only Codex writes into a context block (its environment, its tools),
        ``item`` for the others a block holds (developer messages, injected instructions), None otherwise."""
        if p.get("type") == "additional_tools":
            return "marker"
        if p.get("type") != "message":
            return None
        if p.get("role") in ("developer", "system"):
            return "item"
        text = _text(p).lstrip()
        if text.startswith("<environment_context>"):
            return "marker"
        return "item" if p.get("role") == "user" and text.startswith(_CONTEXT_PREFIXES) else None

    def _close(self) -> None:
        if self.marked:
            self.context.update(self.block)
            self.newer = self.newer or self.developer
        self.block, self.marked, self.developer = [], False, False

    def resends(self) -> bool:
        """Whether the client that resumes the rollout sends its context afresh after a ``compacted`` line
        it did not write: Codex :data:`RESENDS_FROM` and later. The client is told from the rollout: the
        ``session_meta``'s ``cli_version`` names the one that started it, and a newer one that continued it
        shows in a context block holding a developer message (0.87 and later write their permissions or base
        instructions there, 0.58 … 0.80 none: tests/clients, the real logs in tests/data/codex). Without
        either (an older client, a rollout with no session_meta), the context stays in the history."""
        self._close()  # (a block the log ends on)
        return self.newer or (self.version is not None and self.version >= RESENDS_FROM)

    def restored(self, present: set[bytes | None]) -> list[dict[str, Any]]:
        """The latest context items of each kind (environment, AGENTS.md, user instructions) for a client that
        does not send them again (not :meth:`resends`), but those the compacted history holds (``present``:
        its lines): a strategy summarizes them with the turns they opened, and Codex 0.59 … 0.80 would resume
        without them (tests/clients/test_older_codex.py). Their developer messages are kept as they were."""
        if self.resends():
            return []
        return [p for raw, p in self.latest.values() if raw not in present]

    def resent(self, raw: bytes | None) -> bool:
        """Whether the line ``raw`` is one of the context items Codex sends afresh after resuming a
        ``compacted`` line it did not write (when it does: :meth:`resends`): a developer message, the
        ``<environment_context>``, the injected instructions, of a block of them holding an environment or
        ``additional_tools`` (a block Codex writes at the start of a turn). A developer message on its own
        (mid-turn, or a user's) is not."""
        return self.resends() and raw is not None and _digest(raw) in self.context

    def meter(self, post_tokens: int | None) -> dict[str, Any] | None:
        """The ``token_count`` event Codex writes after its own compaction, or None without a size or an
        earlier count to keep the billed totals of."""
        if post_tokens is None or self.info is None:
            return None
        last = self.info.get("last_token_usage")
        keys = [k for k in last if isinstance(last[k], int)] if isinstance(last, dict) else []
        zero = {k: 0 for k in keys or ("input_tokens", "cached_input_tokens", "output_tokens",
                                       "reasoning_output_tokens")}
        info = {**self.info, "last_token_usage": {**zero, "total_tokens": post_tokens}}
        return {"type": "token_count", "info": info, "rate_limits": None}


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=16).digest()


def _text(p: dict[str, Any]) -> str:
    parts = p.get("content")
    return "".join(c.get("text", "") for c in parts if isinstance(c, dict)
                   and isinstance(c.get("text"), str)) if isinstance(parts, list) else ""
