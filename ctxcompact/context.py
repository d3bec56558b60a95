"""The effective context: what the agent will send now (docs/concepts/state.md#the-watermark).

It is built the same way for ``estimate`` and ``run``: the system records of the input, then the summary of
the last compaction (if the state has one), then only the records newer than the watermark; then what earlier
runs decided beyond the watermark (sliding-window events, masked results: each strategy's ``reapply``) is
applied again; then the result is cleaned. That is what is estimated, and what a compaction summarizes.

The state's covered prefix is checked against the input first (exit 3 when it changed) and not parsed again:
its system lines are read from the byte offsets the state keeps.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .call_ids import CallIds
from .clean import Cleaner, Repair, clean
from .errors import InputError, LineError, Problem, StateError, UsageError
from .facts.text import attachments, continuation_text
from .formats import get_format, read_transcript
from .formats.base import Finish, Format, NeedsWhole
from .formats.jsonl import parse_record
from .formats.registry import Detector
from .model import EARLIER_SUMMARY, Record, Role, Transcript
from .options import Options
from .plugins import FORMATS
from .reader import allow_deep_values, decode_line, iter_lines_at
from .source import InputData, count_lines, source_name
from .state import Fingerprint, State, check_fingerprint

#: re-applies what earlier runs decided beyond the watermark (``strategies.reapply_all``)
Reapply = Callable[[list[Record], State, str], list[Record]]


class Spans(Protocol):
    """The input's bytes by slice: the input held, or a file read where sliced (``streaming``: the lines of
    the covered prefix are read by their spans, the file never held)."""

    def __getitem__(self, part: slice, /) -> bytes: ...


@dataclass(slots=True)
class Context:
    """The effective context and what was learnt building it."""

    transcript: Transcript  # system records + summary + records after the watermark, cleaned
    input_records: int  # records in the whole input
    covered: int  # input records replaced by the state's summary (the watermark applied)
    input_bytes: int
    input_lines: int  # physical lines of the input (for the next run's line numbers)
    system_spans: list[tuple[int, int]]  # (offset, length) of the input's system records
    repairs: list[Repair] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # warnings (lenient mode)
    dropped: int = 0
    input_format: str = FORMATS.default
    # the records as read with the state's layers, before cleaning: what a reading with other layers starts
    # from, as the next call reads (sliding_window_input.HeldInput.render); None where nothing is held
    read: list[Record] | None = None


@dataclass(slots=True, eq=False)
class Reread:
    """What a call's held read leaves to the next call on the same input grown at its end (the message-list
    ``Session``, :mod:`ctxcompact.messages`, whose hook is called on every model call with a longer list):
    the records of the parts the cleaner settled (``clean.Cleaner``), as read and as cleaned, and what the
    reading carries past them (the calls' names and ids, the format's finishing, the cleaner's carry), so
    that the next call reads, finishes and cleans only the lines after them, by the same code a whole read
    runs (:func:`build_context`). Taken only where that is exactly the whole read: the input still starts
    with the bytes it was kept after (``prefix``; an edited list reads whole, and keeps a new one), the same
    options and format (detection decided in ``prefix``), no state layer (no watermark, no section) and a
    format that finishes record by record without looking at the end of the input
    (``Format.finish_stream``)."""

    #: (--format, lenient, close_trailing, the source's name, the format read); None: nothing kept yet
    key: tuple[Any, ...] | None = None
    prefix: bytes = b""  # the input's first bytes: the records' below, and the lines detection decided on
    at: int = 0  # the offset of the first line the next call reads (where the part the cleaner held began)
    lines: int = 0  # physical lines before ``at``
    records: list[Record] = field(default_factory=list)  # read and finished, before ``at``
    cleaned: list[Record] = field(default_factory=list)  # what the cleaner handed out for them
    system_spans: list[tuple[int, int]] = field(default_factory=list)  # of their system records
    ids: CallIds | None = None  # the calls' names and ids at ``at`` (a reading starts with a copy)
    started: bool = False  # the cleaner's carry at ``at`` (Cleaner.carried)
    settled: int = 0
    finish: Any = None  # what the format's finishing carries to ``at`` (Finish.kept)
    read_from: int = -1  # where the last call's read began (-1: it read the input whole)
    #: what the records of ``cleaned`` count (``stream_totals.Totals.held``), with the count key they were
    #: counted with (``key``) and the ``at`` they were kept at: set by ``route_held.count_on`` after the
    #: read, so a call that reads on counts only the records after them; None: count them (a new start)
    tally: dict[str, Any] | None = None


def covered_format(opts: Options, fp: Fingerprint) -> str:
    """The format the input after a covered prefix is read as: the state's, when it names one."""
    if not fp.format:
        return opts.format
    if opts.format not in ("auto", fp.format):
        raise UsageError(f"--format {opts.format} does not match the state's format {fp.format}")
    return fp.format


def covered_system(fmt: Format, fp: Fingerprint, data: Spans) -> tuple[list[Record], list[tuple[int, int]]]:
    """The system records of the covered prefix, read from the lines the state names, and their spans."""
    records: list[Record] = []
    for span in fp.system_lines:
        records.append(_parse_prefix_line(fmt, data, span, len(records), Role.SYSTEM, "system"))
    return records, list(fp.system_lines)


def glued_to_prefix(data: Spans, prefix_bytes: int) -> bool:
    """The covered prefix ended on an unterminated line and text was appended to that same line: read
    whole, as validate reads it, the line is two JSON values glued together (an InputError)."""
    return (prefix_bytes > 0 and data[prefix_bytes - 1 : prefix_bytes] != b"\n"
            and data[prefix_bytes : prefix_bytes + 1] != b"")


def summary_messages(fmt: Format, state: State, data: Spans) -> list[Record]:
    """The summary (and continuation) of the last compaction as records of ``fmt``, the continuation followed
    by the attachments of the latest request it quotes (read from their lines in the verified prefix)."""
    summary = state.summary
    if summary is None:
        return []
    continuation = summary.continuation or continuation_text(summary.latest_request)
    attached = [b for i, span in enumerate(summary.attachment_lines)
                for b in attachments(_parse_prefix_line(fmt, data, span, i, Role.USER, "attachment"))]
    return fmt.summary_records(summary.text, continuation, attached)


def build_context(inp: InputData, opts: Options, state: State | None, *, schema: bool,
                  reapply: Reapply | None = None, settled: tuple[str, int] | None = None,
                  reread: Reread | None = None) -> Context:
    """Read the input, replace what the state's summary covers, re-apply the state's layers, and clean.
    ``settled``: the settled prefix the count cache proved unchanged (``formats.jsonl.read_lines``).
    ``reread``: what the last call on this input kept (:class:`Reread`), taken where it may be and kept for
    the next call."""
    data = inp.data
    rereads = reread is not None and inp.document is None and (
        state is None or (state.watermark == 0 and not state.holds_sections()))
    if rereads:
        assert reread is not None
        if state is not None and state.fingerprint.nbytes > 0:
            check_fingerprint(state, data)
        if reread.key is None and opts.format != "auto":  # (the format given: nothing to detect first)
            _keep_start(reread, _reread_key(opts, inp, opts.format, schema), b"")
        ctx = _read_on(inp, opts, state, schema, reapply, settled, reread)
        if ctx is not None:
            return ctx
        reread.key, reread.read_from = None, -1  # (read whole below, and kept anew)
    covered = 0
    prefix_bytes = 0
    prefix_lines = 0
    fmt_name = opts.format
    prefix_system: list[Record] = []
    system_spans: list[tuple[int, int]] = []
    summary_records: list[Record] = []

    if state is not None and (state.watermark > 0 or state.fingerprint.nbytes > 0):
        # a summary's watermark, sliding-window events and masking all fingerprint the input they acted on
        check_fingerprint(state, data)
    if state is not None and state.watermark > 0:
        fp = state.fingerprint
        prefix_bytes = fp.nbytes
        covered = state.watermark
        prefix_lines = fp.lines if fp.lines is not None else count_lines(data, prefix_bytes)
        fmt_name = covered_format(opts, fp)
        fmt = get_format(fmt_name)
        try:
            prefix_system, system_spans = covered_system(fmt, fp, data)
        except StateError:
            if opts.format == "auto" and fp.format:
                _blame_state_format(data, prefix_bytes, fp.format)  # the clearer reason, when it is that
            raise
        summary_records = summary_messages(fmt, state, data)

    if glued_to_prefix(data, prefix_bytes):
        raise InputError(f"line {max(prefix_lines, 1)}: trailing data after the JSON value (a line was "
                         "appended without a newline before it; one JSON value per line)",
                         [Problem(max(prefix_lines, 1), "$", "trailing data after the JSON value "
                                  "(appended without a newline)")])
    stream = io.BytesIO(data)
    stream.seek(prefix_bytes)
    try:
        result = read_transcript(stream, fmt_name, lenient=opts.lenient, schema=schema,
                                 first_line=prefix_lines + 1, first_index=covered, base_offset=prefix_bytes,
                                 settled=settled)
    except InputError:
        if state is None or not state.fingerprint.format or opts.format != "auto":
            raise
        _blame_state_format(data, prefix_bytes, state.fingerprint.format)
        raise
    new_records = result.transcript.records
    fmt_name = result.transcript.format
    for rec in new_records:
        if rec.message is not None and rec.message.role is Role.SYSTEM and rec.offset >= 0 and rec.raw:
            system_spans.append((rec.offset, len(rec.raw)))

    if summary_records and log_carries(summary_records, new_records):
        summary_records = []  # the client's log holds what we wrote (the output put in the input's place)
    records = prefix_system + summary_records + new_records
    if state is not None and reapply is not None:
        records = reapply(records, state, fmt_name)
    transcript = Transcript(format=fmt_name, records=records, source=source_name(inp.path))
    cleaned = clean(transcript, close_trailing=closes_trailing(opts))
    if rereads and not result.problems and not result.dropped:
        assert reread is not None
        _keep_detected(reread, _reread_key(opts, inp, fmt_name, schema), opts, data, new_records)
    return Context(
        transcript=cleaned.transcript,
        input_records=covered + len(new_records) + result.dropped,
        covered=covered,
        input_bytes=len(data),
        input_lines=count_lines(data, len(data)),
        system_spans=system_spans,
        repairs=list(cleaned.repairs),
        problems=list(result.problems),
        dropped=result.dropped,
        input_format=fmt_name,
        read=records,
    )


def _reread_key(opts: Options, inp: InputData, fmt_name: str, schema: bool) -> tuple[Any, ...]:
    return (opts.format, opts.lenient, closes_trailing(opts), source_name(inp.path), fmt_name, schema)


def _keep_start(reread: Reread, key: tuple[Any, ...], prefix: bytes) -> None:
    """Keep the start of the input (nothing read yet) for the next call, when ``key``'s format finishes
    record by record without looking at the end of the input: it reads from the first line on."""
    finish = get_format(key[4]).finish_stream(CallIds(), None)
    if finish is None or type(finish).scan is not Finish.scan:
        return  # (its finishing reads the whole input, or scans its end first: read whole each call)
    reread.key, reread.prefix, reread.at, reread.lines = key, prefix, 0, 0
    reread.records, reread.cleaned, reread.system_spans = [], [], []
    reread.ids, reread.started, reread.settled, reread.finish = None, False, 0, None
    reread.tally = None


def _keep_detected(reread: Reread, key: tuple[Any, ...], opts: Options, data: bytes,
                   records: list[Record]) -> None:
    """After a whole read: keep its start for the next call, with the lines the format was detected on (an
    input that still starts with them detects the same: ``formats.registry.Detector`` decides on them)."""
    end = 0
    if opts.format == "auto":
        detector = Detector()
        decided = next((r for r in records if r.raw is not None and detector.add(r.data, r.line)), None)
        end = decided.offset + len(decided.raw or b"") + 1 if decided is not None else 0
        if decided is None or detector.best() != key[4] or data[end - 1 : end] != b"\n":
            return  # (undecided, or its last line may yet grow: the next call detects again)
    _keep_start(reread, key, data[:end])


def _read_on(inp: InputData, opts: Options, state: State | None, schema: bool, reapply: Reapply | None,
             settled: tuple[str, int] | None, reread: Reread) -> Context | None:
    """The context as :func:`build_context` reads it whole, read from where ``reread`` was kept: its records
    before that point, then the lines after it read, finished and cleaned by the same steps, resuming the
    format's finishing and the cleaner with what they carried there; ``reread`` kept anew where the cleaner
    last settled a part. None (nothing kept changed) where it cannot be the whole read's: another input or
    options, a line with a problem, a state layer that changes the records."""
    data, key = inp.data, reread.key
    fmt_name = key[4] if key is not None else opts.format
    if key is None or key != _reread_key(opts, inp, fmt_name, schema) or not data.startswith(reread.prefix):
        return None
    fmt = get_format(fmt_name)
    ids = reread.ids.copy() if reread.ids is not None else CallIds()
    finish = fmt.finish_stream(ids, reread.finish)
    assert finish is not None
    source = source_name(inp.path)
    cleaner = Cleaner(fmt.layout, fmt.name, source=source, close_trailing=closes_trailing(opts), calls=ids)
    cleaner.resume(ids, reread.started, reread.settled)
    checked_from = settled[1] if settled is not None and settled[0] == fmt.name else 0
    problems: list[Problem] = []
    tail: list[Record] = []
    out: list[Record] = []
    mark: tuple[int, tuple[int, int], Any, bool, int, int] | None = None
    allow_deep_values()
    stream = io.BytesIO(data)
    stream.seek(reread.at)
    for lineno, offset, raw in iter_lines_at(stream, reread.lines + 1):
        try:
            obj = decode_line(raw, lineno)
        except LineError:
            return None  # (the whole read reports it)
        at = reread.at + offset
        rec = parse_record(fmt, obj, len(reread.records) + len(tail), lineno, raw, at,
                           schema and at + len(raw) > checked_from, problems.append)
        if rec is None:
            return None
        try:
            finish(rec)
        except NeedsWhole:
            return None
        tail.append(rec)
        part = cleaner.feed(rec)
        if part:  # ``rec`` begins the part the cleaner holds now: where the next call may read from
            out.extend(part)
            _, started, done = cleaner.carried()
            mark = (len(tail) - 1, ids.mark(), finish.kept(), started, done, len(out))
    try:
        finish.end()
    except NeedsWhole:
        return None
    records = reread.records + tail
    if state is not None and reapply is not None and reapply(records, state, fmt.name) is not records:
        return None
    ending = cleaner.finish()
    spans = [*reread.system_spans, *_system_spans(tail)]
    ctx = Context(
        transcript=Transcript(fmt.name, reread.cleaned + out + ending.transcript.records, source),
        input_records=len(records), covered=0, input_bytes=len(data),
        input_lines=count_lines(data, len(data)), system_spans=spans, repairs=list(ending.repairs),
        input_format=fmt.name, read=records)
    reread.read_from = reread.at
    if mark is not None:
        i, ids_mark, kept, started, done, handed = mark
        first = tail[i]
        head, columns = ids.kept(ids_mark)
        reread.ids = CallIds.read(head, [bytes(c) for c in columns])
        reread.prefix = data[: max(first.offset, len(reread.prefix))]
        reread.at, reread.lines = first.offset, first.line - 1
        reread.records = records[: len(reread.records) + i]
        reread.cleaned = reread.cleaned + out[:handed]
        reread.system_spans = [*reread.system_spans, *_system_spans(tail[:i])]
        reread.started, reread.settled, reread.finish = started, done, kept
    return ctx


def _system_spans(records: list[Record]) -> list[tuple[int, int]]:
    return [(r.offset, len(r.raw)) for r in records
            if r.message is not None and r.message.role is Role.SYSTEM and r.offset >= 0 and r.raw]


def log_carries(summary_records: list[Record], new_records: list[Record]) -> bool:
    """The records read after the watermark already hold the state's summary: an agent's log ctxcompact
    wrote (Claude Code's ``isCompactSummary`` line, Codex's ``compacted`` line) and then put in the input's
    place. Its copy, where the client put it, is what the client sends; adding the state's again counted the
    summary twice. Only the lines the format flags as an earlier summary are searched."""
    texts = [r.message.text().strip() for r in summary_records if r.message is not None]
    texts = [t for t in texts if t]
    if not texts:
        return False
    carried = [r.message.text() for r in new_records
               if r.message is not None and r.meta.get(EARLIER_SUMMARY)]
    return any(all(t in c for t in texts) for c in carried)


def closes_trailing(opts: Options) -> bool:
    """Whether cleaning appends a reply after a trailing tool result: not with --keep-trailing-results, and
    not for an agent's own log (written as the input's format or with --to), which the agent resumes and whose
    next model turn answers the result (clean_part.py, step 6)."""
    written_to_agent_log = opts.to is not None and get_format(opts.to).layout.agent_log
    return not (opts.keep_trailing_results or written_to_agent_log)


def _blame_state_format(data: bytes, start: int, stated: str) -> None:
    """The rest of the input did not read as the format the state names: when it reads as another one,
    the state is what is wrong (exit 3), not the input."""
    try:
        rest = read_transcript(io.BytesIO(data[start:]), "auto", lenient=False, schema=False)
        other = rest.transcript.format
    except InputError:
        return  # the input is broken whatever its format: the input's error stands
    if other != stated:
        raise StateError(f"the state was made for a {stated} transcript, but this one reads as {other}; "
                         "use --reset-state to start over")


def _parse_prefix_line(fmt: Format, data: Spans, span: tuple[int, int], index: int, role: Role,
                       what: str) -> Record:
    """The record at ``span`` of the verified prefix: a system line, or a request whose attachments a
    continuation carries. The offsets come from the state, so they are checked: a whole line, and a message
    of ``role`` (a crafted state must not promote a user line to the system prompt)."""
    offset, length = span
    raw = data[offset : offset + length]
    end = offset + length
    whole_line = ((offset == 0 or data[offset - 1 : offset] == b"\n")
                  and (raw.endswith(b"\n") or data[end : end + 1] in (b"", b"\n", b"\r")))
    where = f"the state's {what} line at byte {offset}"
    if not whole_line:
        raise StateError(f"{where} is not a whole line of the transcript (a corrupt state); "
                         "use --reset-state to start over")
    try:
        obj = decode_line(raw, 0)
        rec: Record = fmt.parse_line(obj, index, 0, raw)
    except Exception as exc:  # the fingerprint matched, so this means a corrupt state
        raise StateError(f"{where} does not parse: {exc}") from None
    if rec.message is None or rec.message.role is not role:
        raise StateError(f"{where} is not a {role.value} message (a corrupt state); "
                         "use --reset-state to start over")
    rec.offset = offset
    return rec


def copies_history(ctx: Context, state: State | None, data: Spans | None = None) -> bool | None:
    """:attr:`~.state.Fingerprint.history` of a fingerprint made of what ``ctx`` read: for an append-only
    log (``Format.compaction_seen``; None for other formats), whether every line read was a record its
    compaction copies as history (``formats.jsonl.history_lines``): no line dropped, no result repaired as
    one without its call, and, after the state's covered prefix, the same said of that prefix. A state
    older than the key does not say it: it is decided here once, by the same rule, from the prefix's lines
    in ``data`` (the input as read), read as a run without a state reads them; without ``data``, false.
    Both routes decide by it, on the same context's figures (pass 1's on the streamed one). What lines
    appended later may change (a fork that leaves a call off the branch) is the reader's to rule out:
    ``compaction_stream.take_prefix``."""
    if get_format(ctx.input_format).compaction_seen() is None:
        return None
    earlier: bool | None = True
    if state is not None and ctx.covered:
        earlier = state.fingerprint.history
        if earlier is None and data is not None:
            earlier = _prefix_copies_history(ctx.input_format, data[: state.fingerprint.nbytes])
    return bool(earlier) and _copies_history(ctx.dropped, ctx.repairs)


def _copies_history(dropped: int, repairs: list[Repair]) -> bool:
    """The rule: no line dropped (``--lenient``), no result repaired as one without its call."""
    return dropped == 0 and not any(r.kind == "orphan_result" for r in repairs)


def _prefix_copies_history(fmt_name: str, prefix: bytes) -> bool:
    """:func:`copies_history` of the covered prefix's lines, read and cleaned as a run without a state
    reads and cleans them (a bad line dropped, as ``--lenient`` drops it: the prefix was read so once)."""
    try:
        read = read_transcript(prefix, fmt_name, lenient=True)
    except InputError:
        return False
    return _copies_history(read.dropped, clean(read.transcript).repairs)
