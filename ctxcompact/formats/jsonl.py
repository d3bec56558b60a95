"""Reading and writing whole JSONL transcripts: every line decoded, detected, parsed and checked against its
format's JSON Schema, with line numbers; and written back byte for byte where nothing changed.

``import ctxcompact.formats`` stays cheap: jsonschema is imported only when a schema check runs."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import InputError, LineError, Problem, UsageError
from ..model import Block, ImageBlock, Message, OpaqueBlock, Record, ToolResult, Transcript
from ..paths import open_input
from ..reader import ORJSON_MAX_DEPTH, allow_deep_values, decode_line, encode_json, iter_lines_at, line_digest
from ..schemacheck import conforms
from ..schemacheck import load as load_schema
from .base import Format
from .registry import detect, get_format

_TOO_DEEP = "nested too deep to read (keep arrays and objects under 1024 levels)"

#: most per-line problems kept; the rest are counted in a final note
MAX_PROBLEMS = 1000


@dataclass(slots=True)
class ReadResult:
    """A transcript read whole, the problems found in its lines, and how many lines were dropped (lenient)."""

    transcript: Transcript
    problems: list[Problem]
    dropped: int


_validators: dict[str, Any] = {}


def _schema_validator(fmt: Format) -> Any:
    """The compiled Draft 2020-12 validator of a format's schema, built once per process."""
    if fmt.name not in _validators:
        from jsonschema import Draft202012Validator  # lazy: keeps `import ctxcompact.cli` light

        path = Path(__file__).resolve().parent.parent / "schemas" / fmt.schema_file
        schema = orjson.loads(path.read_bytes())
        _validators[fmt.name] = Draft202012Validator(schema)
    return _validators[fmt.name]


def _json_path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _short(value: Any) -> str:
    text = encode_json(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_JSON_TYPES = {"string": "a string", "object": "an object", "array": "an array", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _schema_message(error: Any) -> tuple[str, str]:
    """(JSON path, readable message) for one jsonschema error."""
    from ..reader import json_type_name

    path = _json_path(error.absolute_path)
    kind = error.validator
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return path, f"missing required field {missing!r}"
    if kind == "type":
        want = error.validator_value
        wants = [want] if isinstance(want, str) else list(want)
        names = " or ".join(_JSON_TYPES.get(w, w) for w in wants)
        return path, f"expected {names}, got {json_type_name(error.instance)} {_short(error.instance)}"
    if kind == "enum":
        allowed = ", ".join(str(v) for v in error.validator_value)
        return path, f"{_short(error.instance)} is not allowed; expected one of {allowed}"
    if kind == "const":
        return path, f"expected {_short(error.validator_value)}, got {_short(error.instance)}"
    if kind == "minItems":
        return path, f"must have at least {error.validator_value} item(s)"
    if kind == "minimum":
        return path, f"must be at least {error.validator_value}, got {_short(error.instance)}"
    return path, error.message


#: lines known to conform to their format's schema, by (format, digest of the line's bytes). The verdict is a
#: function of the bytes alone, so a hook that reads a growing transcript again in one process checks only the
#: lines it has not seen (the same check, done less: docs/measurements/performance.md#a-hooks-call). Bounded:
#: forgotten all at once when full. ``schema_checks`` counts the lines really checked (the tests read it).
_CONFORMING: set[tuple[str, int]] = set()
_CONFORMING_MAX = 1 << 20
schema_checks = 0


def _line_conforms(fmt: Format, obj: Any, lineno: int, raw: bytes | None,
                   remember: bool = True) -> list[Problem]:
    global schema_checks
    # (hashed only where the memo may answer or will keep it: a reader that keeps nothing, in a process that
    # has kept nothing, as a run from the command line, hashes no line: 7 k instructions a line)
    key = (fmt.name, line_digest(raw)) if raw is not None and (remember or _CONFORMING) else None
    if key is not None and key in _CONFORMING:
        return []
    schema_checks += 1
    found = schema_problems(fmt, obj, lineno)
    if not found and key is not None and remember:
        if len(_CONFORMING) >= _CONFORMING_MAX:
            _CONFORMING.clear()
        _CONFORMING.add(key)
    return found


def schema_problems(fmt: Format, obj: Any, line: int) -> list[Problem]:
    """Every way ``obj`` breaks the format's JSON Schema, as problems (empty when it conforms)."""
    if not fmt.schema_file or conforms(load_schema(fmt.schema_file), obj):
        # the usual case, decided without jsonschema (docs/measurements/performance.md#a-hooks-call)
        return []
    validator = _schema_validator(fmt)
    out = []
    try:
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    except RecursionError:
        return [Problem(line, "$", _TOO_DEEP)]
    for err in errors:
        path, msg = _schema_message(err)
        out.append(Problem(line, path, msg))
    return out


def _open(source: str | Path | BinaryIO | bytes) -> tuple[BinaryIO, str, bool]:
    """(stream, name, we opened it)."""
    if isinstance(source, (bytes, bytearray)):
        return io.BytesIO(bytes(source)), "-", True
    if isinstance(source, (str, Path)):
        if str(source) == "-":
            return sys.stdin.buffer, "-", False
        try:  # a FIFO or a device: read within a bound, never blocking in open() (paths.open_input)
            return open_input(source), str(source), True  # closed by the caller
        except IsADirectoryError:
            raise UsageError(f"{source} is a directory, not a transcript") from None
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    name = getattr(source, "name", None)
    return source, name if isinstance(name, str) else "-", False


def _cap(problems: list[Problem], total: int) -> list[Problem]:
    if total <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS],
            Problem(0, "", f"… and {total - MAX_PROBLEMS} more problems not listed", problems[-1].severity)]


def read_lines(source: str | Path | BinaryIO | bytes, fmt: str = "auto", *,
               schema: bool = True, first_line: int = 1, first_index: int = 0,
               base_offset: int = 0, settled: tuple[str, int] | None = None,
               ) -> tuple[Transcript, list[Problem], int]:
    """Read every line; return (transcript of the good lines, per-line problems, number of bad lines).

    ``settled`` (format, bytes): the input's first bytes are a settled prefix a call already read as that
    format and found good, proven unchanged (docs/concepts/state.md#the-settled-prefix): its lines are not
    checked against the schema again.

    Problems are capped at :data:`MAX_PROBLEMS` (plus a note); bad lines are counted in full. Raises
    InputError only when the format cannot be detected, UsageError for an unknown format or unreadable path.
    """
    chosen = None if fmt == "auto" else get_format(fmt)
    allow_deep_values()
    stream, name, owned = _open(source)
    problems: list[Problem] = []
    total_problems = 0
    bad: set[int] = set()
    dropped: list[bytes] = []  # the raw bad lines, for the format to link past them (relink_dropped)

    def add(p: Problem) -> None:
        nonlocal total_problems
        total_problems += 1
        bad.add(p.line)
        if len(problems) < MAX_PROBLEMS:
            problems.append(p)

    # (line number, byte offset, raw line, decoded object) per good line; each entry is dropped as soon as its
    # record is made, so the tuples and the records are not both held whole (memory per record,
    # docs/measurements/performance.md#memory-per-record)
    decoded: list[tuple[int, int, bytes, Any] | None] = []
    try:
        for lineno, offset, raw in iter_lines_at(stream, first_line):
            try:
                decoded.append((lineno, base_offset + offset, raw, decode_line(raw, lineno)))
            except LineError as err:
                add(Problem(lineno, err.path, err.message))
                dropped.append(raw)
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc}") from None
    finally:
        if owned:
            stream.close()
    if chosen is None:
        chosen = get_format(detect([d[3] for d in decoded if d is not None],
                                   [d[0] for d in decoded if d is not None]))
    records: list[Record] = []
    checked_from = settled[1] if settled is not None and settled[0] == chosen.name else 0
    for i, entry in enumerate(decoded):
        assert entry is not None
        decoded[i] = None
        lineno, offset, raw, obj = entry
        del entry
        rec = parse_record(chosen, obj, first_index + len(records), lineno, raw, offset,
                           schema and offset + len(raw) > checked_from, add)
        if rec is None:
            dropped.append(raw)
        else:
            records.append(rec)
    if dropped:
        chosen.relink_dropped(records, dropped)
    records = chosen.finish(records)
    problems.sort(key=lambda p: p.line)
    transcript = Transcript(format=chosen.name, records=records, source=name)
    return transcript, _cap(problems, total_problems), len(bad)


def parse_record(chosen: Format, obj: Any, index: int, lineno: int, raw: bytes, offset: int, schema: bool,
                 add: Any, remember: bool = True) -> Record | None:
    """One decoded line as a record of ``chosen``, checked against its schema; None (and its problems given
    to ``add``) for a line that is not one. The one per-line step of every reader, whole or streaming.
    ``remember=False``: a conforming line is not added to the lines known to conform (a reader that never
    reads the line again in this process keeps no memory per line)."""
    try:
        rec = chosen.parse_line(obj, index, lineno, raw)
        rec.offset = offset
    except LineError as err:
        add(Problem(lineno, err.path, err.message))
        return None
    except RecursionError:
        add(Problem(lineno, "$", _TOO_DEEP))
        return None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # a shape the parser did not foresee: still the line's fault, named with its number
        add(Problem(lineno, "$", f"not a valid {chosen.name} line ({type(exc).__name__}: {exc})"))
        return None
    found = _line_conforms(chosen, obj, lineno, raw, remember) if schema else []
    for p in found:
        add(p)
    return None if found else rec


def history_lines(data: bytes, fmt_name: str) -> list[tuple[bytes, Any]]:
    """(raw line, decoded object) of each line of ``data`` an append-only log's compaction copies into its
    output (:func:`compaction_output`): the lines the reader reads as records, by its one rule (lines
    end at ``\\n`` only, a CR inside a line is JSON whitespace; then JSON, the format's parse and schema). A
    line lenient reading dropped is not copied (the output must validate), nor a line that only answers
    calls no line of the log makes (their call was on a dropped line)."""
    transcript, _problems, _bad = read_lines(data, fmt_name)
    calls = {c.id for r in transcript.records if r.message is not None for c in r.message.tool_calls()}
    out: list[tuple[bytes, Any]] = []
    for rec in transcript.records:
        msg = rec.message
        if rec.raw is None:
            continue
        if msg is not None and msg.is_tool_result_only and msg.tool_results() and not any(
                t.call_id in calls for t in msg.tool_results()):
            continue
        out.append((rec.raw, rec.data))
    return out


def compaction_output(fmt: Format, input_data: bytes, records: list[Record], pre_tokens: int,
                      post_tokens: int | None = None) -> list[Record]:
    """What to write for a compaction whose context is ``records`` (``pre_tokens`` before it, ``post_tokens``
    after it, as the next request will count): the context itself, but for an append-only log
    (``Format.compaction_seen``: Claude Code, Codex, ADK events), which keeps the input's lines as read and
    records the compaction after them as the agent records its own (``Format.compaction_appended``), with
    what the agent's meter reads. The route that streams makes the same from the same two methods
    (``compaction_stream``)."""
    seen = fmt.compaction_seen()
    if seen is None:
        return records
    history: list[Record] = []
    for i, (raw, data) in enumerate(history_lines(input_data, fmt.name)):
        seen.add(data, raw)
        history.append(Record(index=i, line=i + 1, raw=raw, data=data))
    after = fmt.compaction_appended(seen, records, pre_tokens, post_tokens)
    return records if after is None else [*history, *after]


def read_transcript(source: str | Path | BinaryIO | bytes, fmt: str = "auto", *, lenient: bool = False,
                    schema: bool = True, first_line: int = 1, first_index: int = 0,
                    base_offset: int = 0, settled: tuple[str, int] | None = None) -> ReadResult:
    """Read a JSONL transcript into the model.

    ``source`` is a path (``-`` for stdin), an open binary stream, or the bytes themselves. ``fmt`` is a
    format name or ``auto``. Empty input (or only blank lines) gives an empty transcript in ``fmt``
    (``openai`` when auto). Strict (default): any bad line raises InputError carrying every per-line
    problem (first :data:`MAX_PROBLEMS`, then a note). Lenient: bad lines are dropped, reported as
    warnings and counted in ``dropped``. ``schema=True`` also checks each line against the format's
    JSON Schema. ``first_line``, ``first_index`` and ``base_offset`` say where ``source`` starts within the
    whole input (after a prefix the state covers), so line numbers, record indexes and offsets stay true.
    ``settled``: see :func:`read_lines`.
    """
    transcript, problems, bad = read_lines(source, fmt, schema=schema, first_line=first_line,
                                           first_index=first_index, base_offset=base_offset,
                                           settled=settled)
    if not lenient:
        if problems:
            n = bad
            raise InputError(f"invalid input: {n} bad line{'s' if n != 1 else ''}; first: {problems[0]}",
                             problems)
        return ReadResult(transcript, [], 0)
    warnings = [dataclasses.replace(p, severity="warning") for p in problems]
    return ReadResult(transcript, warnings, bad)



def _neutral_block(b: Block) -> Block:
    """A block without its source format's raw object (binary and opaque blocks keep it: it is their data)."""
    if isinstance(b, (ImageBlock, OpaqueBlock)):
        return b
    if isinstance(b, ToolResult):
        return dataclasses.replace(b, raw=None, content=[_neutral_block(c) for c in b.content])
    return dataclasses.replace(b, raw=None)



def is_unchanged(transcript: Transcript) -> bool:
    """True when every record is an input line nothing changed: it can be written back as read, even in a
    format we cannot otherwise write faithfully (a Claude Code log below the threshold passes through)."""
    return all(rec.raw is not None and not rec.dirty for rec in transcript.records)


def write_transcript(transcript: Transcript, fmt: str | None = None) -> Iterator[bytes]:
    """Yield the transcript's lines (each ending in ``\\n``) in ``fmt`` (default: the transcript's format).

    Same format: a record that nothing changed is written from its ``raw`` bytes, byte for byte (so the
    output differs from the input only by dropped blank lines, CRLF turned into LF and a dropped BOM); a
    changed or made record is written through ``Format.dump_record``.

    Another format (``--to``): every message is rewritten by the target format from the model, without the
    source format's unknown fields (they mean nothing there). A message may become several lines (an
    Anthropic user message with three tool results becomes three OpenAI ``tool`` messages). Records that
    carry no message (progress lines, metadata) are dropped, without error: the target format has no place
    for them. A format that cannot be written faithfully writes its ``fallback`` format instead.
    """
    target = get_format(fmt or transcript.format)
    if not target.writable and target.fallback and not (
        target.name == transcript.format and is_unchanged(transcript)
    ):
        target = get_format(target.fallback)
    if target.name == transcript.format:
        for rec in target.link_records(transcript.records):
            if rec.raw is not None and not rec.dirty:
                yield rec.raw + b"\n"
            else:
                yield encode_json(target.dump_record(rec), ORJSON_MAX_DEPTH) + b"\n"
        return
    for obj in target.link_converted(_converted(transcript, target)):
        yield encode_json(obj, ORJSON_MAX_DEPTH) + b"\n"


def _converted(transcript: Transcript, target: Format) -> Iterator[Any]:
    for rec in transcript.records:
        if rec.message is None:
            continue
        msg = rec.message
        neutral = Message(role=msg.role, blocks=[_neutral_block(b) for b in msg.blocks],
                          source_role=msg.source_role, extra={}, content_was_string=msg.content_was_string)
        dump_many = getattr(target, "dump_messages", None)
        yield from (dump_many(neutral) if dump_many is not None else [target.dump_message(neutral)])
