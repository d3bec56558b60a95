"""The one transcript model that every format reads into and writes out of.

A transcript is a list of :class:`Record` objects, one per non-blank input line. A record either carries a
:class:`Message` (system, user, assistant or tool turn made of content blocks) or carries no message at all
(progress lines, snapshots, session metadata): those are kept and written back untouched.

Losslessness: every record keeps the exact bytes it was read from (``raw``) and the parsed object
(``data``). A record that nothing changed is written back byte for byte; only records marked ``dirty``
(changed by cleaning or compaction) or created by ctxcompact are serialized from the model. Unknown fields of
a message are kept in ``Message.extra`` and unknown block types as :class:`OpaqueBlock`, so even a rewritten
record carries them through.

Tool calls and results are linked by id: a :class:`ToolCall` block in an assistant message is answered by the
:class:`ToolResult` block with the same ``call_id``. Where the result lives depends on the format (a ``tool``
message per result in OpenAI Chat Completions, ``tool_result`` blocks in one user message for Anthropic,
merged ``function_response`` parts for Gemini); the format describes its layout in
:class:`ctxcompact.formats.base.Layout`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class Role(str, enum.Enum):
    """Normalised roles. ``source_role`` on the message keeps the spelling of the format."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Origin(str, enum.Enum):
    """Who made a record: the input, or ctxcompact (so later runs can recognise what it wrote)."""

    INPUT = "input"
    SYNTHETIC = "synthetic"  # made by cleaning (e.g. "Tool no response", "Understood.")
    SUMMARY = "summary"  # the compaction summary
    CONTINUATION = "continuation"  # the message that tells the agent to continue
    MASKED = "masked"  # a tool result replaced by a placeholder


# Fixed token cost of an image or other binary part (see
# docs/concepts/calibration.md#counting-what-the-transcript-holds). Anthropic bills an image at about
# (width*height)/750 tokens, capped near 1,600 for the largest accepted size; OpenAI's high-detail 1024x1024
# tile count is 765. We use the upper figure so estimates never undercount.
IMAGE_TOKENS = 1600


@dataclass(slots=True)
class TextBlock:
    """Plain text: the usual content of a message."""

    text: str
    raw: dict[str, Any] | None = None


@dataclass(slots=True)
class ThinkingBlock:
    """Model reasoning. ``redacted`` blocks carry encrypted data instead of text."""

    text: str
    signature: str | None = None
    redacted: bool = False
    raw: dict[str, Any] | None = None


@dataclass(slots=True)
class ImageBlock:
    """An image, document or other binary part: counted at :data:`IMAGE_TOKENS`, never by its base64."""

    media_type: str | None = None
    raw: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolCall:
    """A request by the model to run a tool.

    ``arguments`` is the arguments as JSON text (what OpenAI carries; for Anthropic the ``input`` object
    serialized compactly); ``input`` is the decoded value when it decodes, else ``None``.
    """

    id: str
    name: str
    arguments: str
    input: Any = None
    raw: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolResult:
    """The answer to a :class:`ToolCall` with the same ``call_id``.

    ``is_error`` is the format's own error flag, written back as read (Anthropic and Claude Code
    ``is_error``). ``succeeded`` is the outcome the log records in a structured field, whatever the format:
    True when it says the tool succeeded (exit code 0, ``is_error`` false, ``status: success``), False when
    it says it failed (a non-zero exit code, ``is_error``, an ``error`` field), None when it records none;
    each format reader fills it, and only then do the words of the output decide
    (docs/concepts/summary.md#errors-files-and-subagents-in-the-summary).
    """

    call_id: str
    content: list[Block]
    is_error: bool = False
    name: str | None = None  # the tool's name where the format records it (Gemini), else filled in by linking
    synthetic: bool = False
    raw: dict[str, Any] | None = None
    succeeded: bool | None = None

    def text(self) -> str:
        return blocks_text(self.content)


@dataclass(slots=True)
class OpaqueBlock:
    """A block of a kind the model does not interpret (server tools, citations, audio…), carried through.

    ``text`` is what of it counts as tokens (its JSON, minus any binary payload), decided by the format.
    """

    kind: str
    text: str = ""
    raw: dict[str, Any] | None = None


Block = TextBlock | ThinkingBlock | ImageBlock | ToolCall | ToolResult | OpaqueBlock


@dataclass(slots=True)
class Message:
    """One turn of the conversation: its role and its content blocks."""

    role: Role
    blocks: list[Block]
    source_role: str = ""  # the role as the format spelled it ("developer", "model", …)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level fields, carried through
    content_was_string: bool = False  # the format gave content as a plain string (written back that way)

    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.blocks if isinstance(b, ToolCall)]

    def tool_results(self) -> list[ToolResult]:
        return [b for b in self.blocks if isinstance(b, ToolResult)]

    def text(self) -> str:
        """The plain text of the message (text blocks only), joined by newlines."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def is_tool_result_only(self) -> bool:
        return bool(self.blocks) and all(isinstance(b, ToolResult) for b in self.blocks)


@dataclass(slots=True)
class Usage:
    """Prompt tokens a provider reported for the request that produced this record.

    ``prompt_tokens`` is the whole prompt as billed: for Anthropic input + cache creation + cache read.
    ``context_window`` is set where the log records it (Codex ``token_count``).
    """

    prompt_tokens: int
    output_tokens: int | None = None
    context_window: int | None = None
    source: str = ""  # e.g. "usage.prompt_tokens", "message.usage"
    #: the figure is the size of the context through this record (a compaction's recorded size: Claude Code's
    #: ``compactMetadata.postTokens``, Codex's meter after a ``compacted`` line), not of a request that
    #: produced it: it covers this record too
    after: bool = False


#: the parts of an Anthropic prompt as billed: with prompt caching ``input_tokens`` is only the uncached tail
ANTHROPIC_PROMPT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def anthropic_prompt_tokens(usage: Any) -> int | None:
    """An Anthropic usage's prompt as billed: ``input_tokens + cache_creation_input_tokens +
    cache_read_input_tokens`` (the parts present); None when none of them is a count (the one rule,
    docs/concepts/calibration.md#observeusage)."""
    if not isinstance(usage, dict):
        return None
    parts = [usage.get(k) for k in ANTHROPIC_PROMPT_KEYS]
    counts = [p for p in parts if isinstance(p, int) and not isinstance(p, bool) and p >= 0]
    return sum(counts) if counts else None


# Record.meta keys of a subagent's work (a Claude Code sidechain or agent_progress line): a line the model of
# the main conversation never sees (the record has no message), but what the summary says the subagent did
# (facts.subagents). SUBAGENT_MESSAGE: the line as a Message; SUBAGENT_RUN: the id shared by the lines of one
# run of a subagent; SUBAGENT_CALL: the id of the tool call that started it, where the log records it.
SUBAGENT_MESSAGE = "subagent_message"
SUBAGENT_RUN = "subagent_run"
SUBAGENT_CALL = "subagent_call"


# Record.meta keys of the handoff (docs/concepts/handoff.md), set by each format's parser from where a line
# came from, never from how its text starts. EARLIER_SUMMARY: the record carries a summary of the earlier
# conversation that an agent, a framework or ctxcompact wrote (the value names who: "claude-code", "codex",
# "adk", "anthropic", "openai", "ctxcompact"); OPAQUE_SUMMARY: that summary is encrypted (kept as it is, never
# read or dropped); INTERRUPTED: the client's own "request interrupted" marker; INSTRUCTIONS: text the client
# expanded from an active skill or slash command (instructions in force, not typed by the user).
EARLIER_SUMMARY = "earlier_summary"
OPAQUE_SUMMARY = "opaque_summary"
INTERRUPTED = "interrupted"
INSTRUCTIONS = "instructions"
#: the whole text of the interruption markers a client writes as a text block of their own (Claude Code); a
#: person's text that merely starts like one is a request
INTERRUPTION_TEXTS = frozenset({"[Request interrupted by user]",
                                "[Request interrupted by user for tool use]"})


def is_interruption_message(message: Message) -> bool:
    """A user message made only of whole interruption markers (:data:`INTERRUPTION_TEXTS`)."""
    if message.role is not Role.USER or not message.blocks:
        return False
    return all(isinstance(b, TextBlock) and b.text.strip() in INTERRUPTION_TEXTS for b in message.blocks)


class _NoMeta(dict[str, Any]):
    """The one empty ``meta`` shared by every record that has none (most lines of most formats): a fresh
    ``{}`` per record is 64 bytes of each of millions of records (memory per record,
    docs/measurements/performance.md#memory-per-record). Writing into it raises, so a record that needs meta
    must be given its own dict (``meta={...}`` or ``dataclasses.replace(rec, meta={**rec.meta, …})``), never
    share one by accident."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kw: Any) -> Any:
        raise TypeError("Record.meta is shared when empty: give the record its own dict")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _refuse
    __ior__ = _refuse


NO_META: dict[str, Any] = _NoMeta()


@dataclass(slots=True)
class Record:
    """One line of a transcript."""

    index: int  # 0-based position among the input's records (blank lines skipped)
    line: int  # 1-based line number in the input file (0 for records ctxcompact made)
    raw: bytes | None  # the exact line as read, without its line ending; None when made by ctxcompact
    data: Any  # the decoded JSON object of the line (the format's own shape)
    message: Message | None = None  # None for lines that carry no message
    usage: Usage | None = None
    origin: Origin = Origin.INPUT
    dirty: bool = False  # changed since read: must be serialized from the model, not copied from raw
    # format facts (invocation_id, timestamp, uuid…); NO_META, shared and read-only, when there are none
    meta: dict[str, Any] = field(default_factory=lambda: NO_META)
    offset: int = -1  # byte offset of the line in the input (-1 when unknown or made by ctxcompact)

    @property
    def role(self) -> Role | None:
        return self.message.role if self.message else None


@dataclass(slots=True)
class Transcript:
    """A parsed transcript: its format name and records in input order."""

    format: str
    records: list[Record]
    source: str = "-"  # path or "-" for stdin

    def messages(self) -> Iterator[Message]:
        for rec in self.records:
            if rec.message is not None:
                yield rec.message

    def message_records(self) -> list[Record]:
        return [r for r in self.records if r.message is not None]


def blocks_text(blocks: list[Block]) -> str:
    """Plain text of a block list (text of text blocks and of nested tool results)."""
    parts: list[str] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif isinstance(b, ToolResult):
            parts.append(b.text())
    return "\n".join(parts)


def token_text(message: Message) -> tuple[list[str], int]:
    """Everything in a message that costs tokens, as strings, plus the fixed cost of binary parts.

    Counts text, thinking text, tool-call names and arguments, tool-result content (recursively) and the
    token-bearing text of opaque blocks. Images and other binary parts add :data:`IMAGE_TOKENS` each.
    Both the heuristic and the exact counters use this one function, so they always measure the same thing.
    """
    blocks = message.blocks
    if len(blocks) == 1 and type(blocks[0]) is TextBlock:  # most messages: one text, nothing to walk
        return [blocks[0].text], 0
    texts: list[str] = []
    fixed = 0
    stack: list[Block] = list(reversed(blocks))
    while stack:
        b = stack.pop()
        if isinstance(b, (TextBlock, ThinkingBlock)):
            texts.append(b.text)
        elif isinstance(b, ToolCall):
            texts.append(b.name)
            texts.append(b.arguments)
        elif isinstance(b, ToolResult):
            stack.extend(reversed(b.content))
        elif isinstance(b, ImageBlock):
            fixed += IMAGE_TOKENS
        elif isinstance(b, OpaqueBlock) and b.text:
            texts.append(b.text)
    return texts, fixed


def message_chars(message: Message) -> int:
    texts, _ = token_text(message)
    return sum(map(len, texts))
