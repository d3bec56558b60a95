"""The small interface every transcript format implements: sniff, parse a line, dump a record.

A format module turns one decoded JSONL line into a :class:`~ctxcompact.model.Record` (with a
:class:`~ctxcompact.model.Message` when the line carries one) and back. Everything else (validation,
cleaning, estimation, compaction) works on the model and asks the format only through this interface and its
:class:`Layout`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..call_ids import CallIds
from ..model import Block, ImageBlock, Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult, Usage


@dataclass(frozen=True, slots=True)
class Layout:
    """How a format arranges what the cleaner must keep valid.

    results_per_message: True when each tool result is its own message (OpenAI ``tool`` messages); False
        when all results answering one assistant message are merged into one message (Anthropic
        ``tool_result`` blocks in one user message, Gemini ``function_response`` parts in one Content).
    result_role: the role of the message that carries results (TOOL for OpenAI, USER otherwise).
    alternate: the API requires user/assistant alternation (consecutive same-role messages are merged).
    split_turns: one model turn may span several consecutive assistant lines (Claude Code writes one line
        per content block, Codex one line per response item), so parallel calls on consecutive lines are
        answered after the last of them, not each right after its own line.
    tree: the log is a tree by parent links (Claude Code's ``parentUuid``), not a list: a result is valid
        wherever it hangs off its call (Claude Code writes parallel results in completion order, with progress
        and hook lines between them), so results are not moved or reordered, and a call with no result after
        the last turn is the live call of a running session, not a missing result.
    agent_log: the file is an agent's own session log that the agent resumes (Claude Code, Codex): the next
        model turn answers a trailing tool result, so cleaning appends no reply the model did not write.
    """

    results_per_message: bool
    result_role: Role
    alternate: bool
    split_turns: bool = False
    tree: bool = False
    agent_log: bool = False


def omitted_text_part(kind: Any, media_type: str | None) -> dict[str, str]:
    """The text part written where a conversion has no place for a binary part (of type ``kind``): visible,
    so that a conversion never drops content without a trace."""
    return {"type": "text", "text": f"[{kind or 'binary'} content omitted: {media_type or 'unknown type'}]"}


def str_field(obj: Any, key: str) -> str | None:
    """``obj[key]`` when ``obj`` is an object and the value a string, else None.

    Detection and parsing compare such values against sets and dicts of names; an array or object there
    (``{"role": ["user"]}``) must read as "not a name", never reach a hash lookup.
    """
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def block_types(content: Any) -> set[str]:
    """The string ``type`` of every object in a content array (other values are left out)."""
    if not isinstance(content, list):
        return set()
    return {t for t in (str_field(b, "type") for b in content) if t is not None}


class Format(abc.ABC):
    name: str = ""
    layout: Layout
    #: False for formats whose output we cannot make faithful (they write ``fallback`` instead).
    writable: bool = True
    #: the format written instead when this one is not writable
    fallback: str = ""
    #: said on stderr when a compaction is written in this format and part of its form is unverified
    compaction_note: str = ""
    #: file name of the JSON Schema in ``schemas/`` that ``validate`` checks each line against
    schema_file: str = ""
    #: the continuation can carry the images and documents attached to the latest request
    #: (docs/concepts/handoff.md#attachments-of-the-latest-request); a format that cannot names them in its
    #: text instead
    carries_attachments: bool = True
    #: the project instruction files this format's client sends the model itself, by name (Codex: AGENTS.md
    #: after resuming, Claude Code: CLAUDE.md on every request; docs/guides/claude-code-codex.md): a summary
    #: written into its log does not quote their rules (``facts.rules.sent_by_client``)
    client_files: tuple[str, ...] = ()

    @abc.abstractmethod
    def sniff(self, obj: Any) -> int:
        """How sure (0-100) we are that a decoded line belongs to this format. 0 = certainly not."""

    @abc.abstractmethod
    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        """Build the record for one decoded line. Raise :class:`~ctxcompact.errors.LineError` when the line
        does not have the format's shape (the message names the JSON path)."""

    @abc.abstractmethod
    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        """The JSON object for a message: used for records that changed or that ctxcompact made.

        ``record`` is the record the message came from, if any (its ``data`` holds the line's envelope for
        formats that wrap messages). Unknown fields in ``message.extra`` are written back."""

    def relink_dropped(self, records: list[Record], dropped: Sequence[bytes]) -> None:
        """Before :meth:`finish`, given the raw lines lenient reading dropped: keep the links between the
        records whole past them (Claude Code's ``parentUuid`` chain). Default: nothing links lines."""
        return None

    def finish(self, records: list[Record]) -> list[Record]:
        """Whole-file pass after every line is parsed (link ids, follow chains). Default: nothing."""
        return records

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish | None:
        """:meth:`finish` one record at a time, for a reader that streams; None when it needs the whole file
        (a chain followed from the last line). ``names``: what it carries from record to record (the calls'
        names by id), given by a reader that resumes after a prefix (``streaming``) and filled in place;
        ``kept``: what else it carries (:meth:`Finish.kept` of the read that stopped there). Raises
        TypeError, ValueError or KeyError on a ``kept`` it does not take."""
        return Finish() if type(self).finish is Format.finish else None

    def api_turns(self, records: list[Record]) -> list[Record]:
        """The records with one message per message the provider's API sent or received, for writing in
        another format (``--to``). Default: the records themselves; a format that writes one API message
        over several lines (Claude Code) joins them."""
        return records

    def make_message(self, role: Role, text: str) -> Message:
        """A plain text message of this format (summary, continuation, synthetic replies)."""
        return Message(role=role, blocks=[TextBlock(text)], source_role=role.value, content_was_string=True)

    def summary_records(self, summary_text: str, continuation: str,
                        attached: Sequence[ImageBlock] = ()) -> list[Record]:
        """The records that stand for a compacted conversation: the summary, then the continuation, followed
        by ``attached``, the images and documents of the latest request it quotes.

        Formats that require alternation get one user message holding both texts: the API merges consecutive
        user messages anyway, and a single message keeps strict user/assistant alternation valid on its own.
        """
        if self.layout.alternate:
            blocks: list[Block] = [TextBlock(summary_text), TextBlock(continuation), *attached]
            return [new_record(Message(role=Role.USER, blocks=blocks, source_role="user"), Origin.SUMMARY)]
        cont = self.make_message(Role.USER, continuation)
        if attached:
            cont.blocks.extend(attached)
            cont.content_was_string = False
        return [new_record(self.make_message(Role.USER, summary_text), Origin.SUMMARY),
                new_record(cont, Origin.CONTINUATION)]

    def compaction_seen(self) -> Any | None:
        """For a format whose logs are append-only (Claude Code, Codex, ADK events), whose compaction is
        written as the agent records its own (the input's lines as read, then :meth:`compaction_appended`:
        ``formats.jsonl.compaction_output``, and the route that streams, ``compaction_stream``): what it
        takes of those lines, gathered line by line (``add(data, raw)``), so the compaction can be written
        without holding the input. None otherwise: a compaction is written as the compacted context."""
        return None

    def compaction_appended(self, seen: Any, records: list[Record], pre_tokens: int,
                            post_tokens: int | None = None) -> list[Record] | None:
        """What a compaction writes after the input's lines, from what ``seen``
        (:meth:`compaction_seen`) gathered of them; None when it writes the context itself."""
        return None

    def foreign_type(self, record: Record) -> str | None:
        """The line type of a record that is not part of the conversation and of a type this format does not
        know (a newer client's), which is passed through as it is and not counted; None otherwise."""
        return None

    def link_records(self, records: list[Record]) -> list[Record]:
        """Before writing in this format: give the records ctxcompact made (and those it moved them before) a
        place in the format's links between lines (Claude Code's ``parentUuid`` tree). Default: nothing."""
        return records

    def link_converted(self, objs: Iterator[Any]) -> Iterator[Any]:
        """Before writing lines converted from another format (``--to``): link them as the format wants.
        Default: as they are."""
        return objs

    def from_list_item(self, obj: Any) -> Any:
        """A message of a list given to the message-list API (``messages.compact``, as plain JSON) as the
        line this format reads. Default: the message is the line (a format overriding it is called)."""
        return obj

    def to_list_item(self, obj: Any) -> Any:
        """A line this format wrote, as the message the message-list API hands back. Default: the line."""
        return obj

    def dump_record(self, record: Record) -> Any:
        """The JSON object to write for a record that changed or was made by ctxcompact."""
        if record.message is None:
            return record.data
        return self.dump_message(record.message, record)


class NeedsWhole(Exception):
    """A record only :meth:`Format.finish` over the whole file can finish (a compaction line that hides the
    lines before it): a reader that streams leaves the file to the held route."""


class Restart(NeedsWhole):
    """A record a read resumed after a prefix cannot finish (what it carries over the prefix cannot be taken
    back: a Claude Code compact_boundary after messages it counted), but a read from the file's start can."""


class Forked(Restart):
    """A record only a read that knows what every line of the file says can finish (a Claude Code fork off
    the branch the records were read on: a rewind): a read from the file's start that first asks
    :meth:`Finish.follow` can."""


class Finish:
    """:meth:`Format.finish` one record at a time (:meth:`Format.finish_stream`), called on each record in
    order before anything else sees it; raises :class:`NeedsWhole` on a record it cannot finish alone."""

    def scan(self, path: Path, at: int, limit: int | None) -> None:
        """Before the read: what only the end of the file says (Claude Code's last compact_boundary), found in
        the bytes of ``path`` from offset ``at`` (up to ``limit``, None: the end) without parsing them.
        Default: nothing."""
        return None

    def follow(self, path: Path, at: int, limit: int | None, known: Any = None) -> Any:
        """Before a read from offset ``at`` (after :meth:`scan`) that a :class:`Forked` asked for: what only
        every line says (Claude Code's active branch), read from the lines of ``path`` (to ``limit``), or
        ``known``: what this returned to an earlier read of the same bytes (pass 1's, given to pass 2).
        Returns it (marshal-able); :meth:`end` checks it against the records read. Default: nothing."""
        return None

    def followed(self) -> Any:
        """After :meth:`end`: what :meth:`follow` gives a read of the same bytes from the start (pass 2's),
        whether this read found it or resumed with it (None: nothing to follow)."""
        return None

    def __call__(self, rec: Record) -> None:
        return None

    def end(self) -> None:
        """After the last record: raises :class:`NeedsWhole` where the end of the file undoes what was
        finished record by record (a Claude Code fork off the branch the records were read on)."""
        return None

    #: a line the read reaches hides lines before it (a Codex or ADK compaction line, found by :meth:`scan`)
    hides = False
    #: a line the read reaches (found by :meth:`scan`) makes every message before it history only in
    #: :meth:`Format.finish` over the whole file, whatever the lines before it are (Claude Code's
    #: compact_boundary, Codex's compacted line; not an ADK compaction, which hides a range of timestamps:
    #: :meth:`hides_taken`): no line before where the read starts can then be a tool result without its
    #: call, read or not (``compaction_stream.take_prefix``)
    hides_all = False
    #: the offset of the record :meth:`late_usage` is for (a reader notes where it lands in the context)
    target: int | None = None

    def hides_taken(self, taken: Any) -> bool:
        """After the lines before where the read starts were given to ``taken`` (``Format.compaction_seen``:
        ``compaction_stream.take_prefix``): whether lines the read reaches (found by :meth:`scan`) make every
        message of them history only in :meth:`Format.finish` over the whole file, as :attr:`hides_all`
        says whatever they are. Default: :attr:`hides_all`."""
        return self.hides_all

    def late_usage(self) -> Usage | None:
        """After :meth:`end`: the usage only the end of the file gives the record at :attr:`target` (Claude
        Code's postTokens when no bill follows its boundary), as :meth:`Format.finish` gives it. Default:
        none."""
        return None

    def kept(self) -> Any:
        """What the records before the last one finished leave to the records after them (marshal-able;
        None: nothing but the names), for a reader that resumes at the last one (``streaming``'s resume
        point begins at a record it read)."""
        return None


def marked_lines(stream: BinaryIO, at: int, limit: int | None, mark: bytes,
                 size: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """The lines of ``stream`` from offset ``at`` (to ``limit``; None: the end) that hold ``mark``, with their
    offsets, found by their bytes (:meth:`Finish.scan`: a compaction line before the lines are parsed). Read
    ``size`` bytes at a time, and only each new chunk is searched for a newline; of a line longer than a
    chunk only whether the mark is in it is kept (and its last bytes, where a mark may begin), and the line
    is read again whole only if it is: one long line costs its length, not a re-join per chunk."""
    stream.seek(at)
    off = line = at  # off: the next byte to read; line: where the line not ended yet begins
    carry = b""  # the bytes of that line read so far (its last few only, once it is longer than a chunk)
    long = marked = False
    keep = len(mark) - 1
    while True:
        want = size if limit is None else min(size, limit - off)
        chunk = stream.read(want) if want > 0 else b""
        off, eof = off + len(chunk), not chunk
        first = chunk.find(b"\n")
        if not eof and first < 0:  # the line goes on past this chunk
            carry += chunk
            marked = marked or mark in carry
            carry, long = carry[max(0, len(carry) - keep):], True
            continue
        if long:  # a long line ends here (or at the end)
            stop = off if eof else off - len(chunk) + first
            if marked or mark in carry + chunk[:first]:
                here = stream.tell()
                stream.seek(line)
                whole = stream.read(stop - line)
                stream.seek(here)
                yield line, whole
            if eof:
                return
            carry, line, long, marked = b"", stop + 1, False, False
            chunk = chunk[first + 1:]
        data = carry + chunk
        end = len(data) if eof else data.rfind(b"\n") + 1
        hit = data.find(mark, 0, end)
        while hit >= 0:
            start = data.rfind(b"\n", 0, hit) + 1
            stop = data.find(b"\n", hit)
            stop = end if stop < 0 else stop
            yield line + start, data[start:stop]
            hit = data.find(mark, stop, end)
        if eof:
            return
        carry, line = data[end:], line + end


class LinkNames(Finish):
    """:func:`link_result_names` one record at a time: the calls' names by id are all it carries."""

    def __init__(self, names: CallIds | None = None) -> None:
        self.names = CallIds() if names is None else names

    def __call__(self, rec: Record) -> None:
        link_result_name(rec, self.names)


def link_result_names(records: list[Record], names: CallIds | None = None) -> list[Record]:
    """Give each tool result the name of the call it answers (OpenAI tool messages and Anthropic
    tool_result blocks do not name their tool; placeholders, summaries and reports want it). ``names``: the
    calls of the records before (a stream carries it from part to part)."""
    names = CallIds() if names is None else names
    for rec in records:
        link_result_name(rec, names)
    return records


def link_result_name(rec: Record, names: CallIds) -> None:
    """:func:`link_result_names` of one record (a stream's reader calls it per record)."""
    if rec.message is None:
        return
    for b in rec.message.blocks:
        if isinstance(b, ToolCall):
            names.give_name(b.id, b.name)  # (the first call with an id names it)
        elif isinstance(b, ToolResult) and b.name is None:
            name = names.name(b.call_id)
            if name is not None:
                b.name = name


def new_record(message: Message, origin: Origin, meta: dict[str, Any] | None = None) -> Record:
    """A record made by ctxcompact (no input line)."""
    return Record(index=-1, line=0, raw=None, data=None, message=message, origin=origin, dirty=True,
                  meta=dict(meta or {}))
