"""The streaming fast path of ``estimate``: counts straight from each decoded line, never building the model.

The full path (``context.build_context``) reads the whole file, builds a Record and a Message per line, cleans
the transcript and counts it. For the common case, a well-formed OpenAI transcript with no state beyond a
calibration, that is most of the time of ``estimate --exact none`` and all of its memory. Here each line is
decoded with orjson and its token-bearing characters are summed from the dict itself; only small integers
per message are kept (for the usage-prefix calibration), so memory is bounded by the largest line.

Results are identical to the full path (tests/tokens/test_fast_estimate.py compares whole reports), including
the repairs the cleaner would make that change counts, which the fast path accounts for exactly:

- a call with no result: a synthetic ``tool`` message ``Tool no response`` right after the call's turn
  (where clean.py puts it: before the next non-result message, or at the end);
- a transcript that ends on a tool result: an assistant ``Understood.`` appended.

Anything else makes the fast path give up and the caller runs the full path (the rule, see
:func:`ctxcompact.engine.estimate`): a line that does not decode or does not have the format's shape (the
full path reports it with its line number), a result that is not the next expected one (moved, reordered,
orphan or duplicate results), a repeated call id, a format that has no fast reader (only ``openai`` has one:
formats whose cleaning merges messages or moves blocks would need the cleaner), detection still undecided
after :data:`~ctxcompact.formats.DETECT_LINES` lines, stdin, a state that covers a prefix or carries masking
or sliding-window events, strategies whose estimate needs the whole context, and ``--exact anthropic``.

Fast readers live beside each format's parser (``Format.fast_line``, optional: ``(obj, want_text) ->
FastLine``). A format without one simply always takes the full path.

Exact counts of a large file (:data:`PARALLEL_BYTES`) are made on forked worker processes, each decoding,
reading and encoding its own byte range of the file (ranges cut at line starts), returning per line only
small facts and a token count; the parent walks them in order as above. tiktoken's own thread pool does not
help here (its encoder holds the GIL for most of each call: two threads ran no faster than one, measured),
and sending the text to workers would cost a copy of it; reading the file in each worker costs nothing.
The ranks are parsed once, in the parent, and inherited through fork.
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..clean import NO_RESPONSE, UNDERSTOOD
from ..errors import InputError
from ..formats.base import FastLine, FastLineReader, NotFast

# ----------------------------------------------------------------------------------------------- counting


@dataclass(slots=True)
class FastCounts:
    """What the full path's Context + Counts would say, for the report."""

    format: str
    records: int  # input records (non-blank lines)
    messages: dict[str, int] = field(default_factory=dict)  # by role, in order of first appearance
    tool_calls: int = 0
    chars: int = 0
    heuristic: array[int] = field(default_factory=lambda: array("q"))  # per message of the cleaned context
    exact: array[int] | None = None
    system: array[int] = field(default_factory=lambda: array("q"))  # indexes of system messages
    # (index as above, line, prompt tokens) of every message with usage.prompt_tokens > 0, in order
    usage: list[tuple[int, int, int]] = field(default_factory=list)
    repairs: int = 0




class _Exact:
    """Exact counts of the messages in order, in bounded batches (each batch's token ids are dropped once
    counted). Counts already known (from workers) are taken as they are."""

    BATCH_CHARS = 4_000_000

    def __init__(self, encoding: str) -> None:
        from . import exact

        self._count = exact.count_texts
        self.enc = encoding  # a name: small batches count without building the Encoding (tokens/bpe.py)
        self._texts: list[str] = []
        self._at: list[int] = []  # positions in ``out`` still waiting for the batch's counts
        self._size = 0
        self.out = array("q")

    def add(self, texts: list[str] | None, fixed: int, known: int | None = None) -> None:
        if known is not None:
            self.out.append(known + fixed)
            return
        text = "\n".join(texts or [])  # tokens.exact.BLOCK_SEPARATOR
        self._at.append(len(self.out))
        self.out.append(fixed)
        self._texts.append(text)
        self._size += len(text)
        if self._size >= self.BATCH_CHARS:
            self.flush()

    def flush(self) -> None:
        if self._texts:
            for i, n in zip(self._at, self._count(self._texts, self.enc), strict=True):
                self.out[i] += n
        self._texts, self._at, self._size = [], [], 0


def _detect(objs: list[Any], lines: list[int], complete: bool) -> str:
    """The format ``formats.detect`` would name from every line, judged from the first ones; NotFast when the
    first :data:`DETECT_LINES` lines do not decide it (detection would read on)."""
    from .. import formats

    if not complete:
        names = list(formats.FORMATS)
        count = dict.fromkeys(names, 0)
        total = dict.fromkeys(names, 0)
        for obj in objs:
            for n in names:
                s = formats.FORMATS[n].sniff(obj)
                if s > 0:
                    count[n] += 1
                    total[n] += s
        if formats.leader(names, count, total, decided=True) is None:
            raise NotFast("detection undecided")
    try:
        return formats.detect(objs, lines)
    except InputError:  # the full path reports it, with any bad line it finds first
        raise NotFast("detection failed") from None


#: exact counts of files at least this large are spread over worker processes (tiktoken's own threads do
#: not scale here: its encoder holds the GIL for most of the call, measured by bench/exact.py)
PARALLEL_BYTES = 8_000_000
_BOM = b"\xef\xbb\xbf"


def has_fast_reader(fmt: str) -> bool:
    """Whether a transcript named ``fmt`` (or ``auto``) may take the fast path at all."""
    if fmt == "auto":
        return True
    from ..formats import get_format

    return get_format(fmt).fast_line is not None


def cores() -> int:
    """The processors this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def count_file(path: str | Path, fmt: str = "auto", encoding: str | None = None,
               jobs: int | None = None) -> FastCounts:
    """Count a transcript file in one streaming pass. ``encoding``: also count exactly with tiktoken, on
    ``jobs`` worker processes (default: all cores) when the file is large.

    Raises NotFast whenever the result could differ from the full path's (see the module docstring)."""
    from ..formats import DETECT_LINES, get_format
    from ..reader import iter_lines_at

    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed in the finally below
        size = os.fstat(stream.fileno()).st_size
    except OSError as exc:
        raise NotFast(f"cannot open: {exc}") from None
    try:
        lines = iter_lines_at(stream)
        head: list[tuple[int, Any]] = []
        complete = True
        lineno = 0
        for lineno, _off, raw in lines:
            head.append((lineno, _decode(raw)))
            if len(head) >= DETECT_LINES:
                complete = False
                break
        if complete and len(head) == 1 and isinstance(head[0][1].get("events"), list):
            raise NotFast("an ADK session export on one line (reader.split_document)")
        name = fmt
        if fmt == "auto":
            name = _detect([o for _, o in head], [n for n, _ in head], complete) if head else "openai"
        reader = get_format(name).fast_line
        if reader is None:
            raise NotFast(f"no fast reader for {name}")
        exact = _Exact(encoding) if encoding else None
        jobs = min(jobs or cores(), 8)
        # heuristic counts stay in-process: forked parsing measured slower (0.49 s vs 0.29 s on 100 MB),
        # the per-line results cost more to send back than the parse they share
        if encoding and jobs > 1 and size >= PARALLEL_BYTES and _can_fork():
            items: Iterable[tuple[int, FastLine, int | None]] = _parallel_lines(path, size, name, encoding,
                                                                                jobs)
        else:
            # the rest straight from the stream: iter_lines_at reads by readline, so nothing is buffered ahead
            items = _serial_lines(head, stream, lineno, reader, exact is not None)
        return _merge(name, items, exact)
    except OSError as exc:
        raise NotFast(f"read error: {exc}") from None
    finally:
        stream.close()


def _serial_lines(head: list[tuple[int, Any]], stream: Any, lineno: int, reader: FastLineReader,
                  want_text: bool) -> Iterator[tuple[int, FastLine, None]]:
    """The head's lines, then the stream's from line ``lineno + 1`` on (reader.iter_lines_at's rules, inlined:
    this loop is most of the fast path's own time)."""
    for n, obj in head:
        yield n, reader(obj, want_text), None
    loads = orjson.loads
    for chunk in stream:
        lineno += 1
        line = chunk[:-2] if chunk.endswith(b"\r\n") else chunk[:-1] if chunk.endswith(b"\n") else chunk
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            raise NotFast("a line does not decode") from None
        if type(obj) is not dict:
            raise NotFast("a line is not an object")
        yield lineno, reader(obj, want_text), None


def _merge(name: str, items: Iterable[tuple[int, FastLine, int | None]], exact: _Exact | None) -> FastCounts:
    """Walk the lines in order as the cleaner would: count every message, add the synthetic results of
    unanswered calls and the closing reply, and give up (NotFast) on anything else it would rewrite."""
    walk = Walk(FastCounts(format=name, records=0), exact)
    walk.feed(items)
    return walk.finish()


class Walk:
    """The walk of :func:`_merge`, resumable: :meth:`snapshot` before :meth:`finish` keeps everything the
    next lines depend on, so a grown file is walked from where the last walk stopped (the snapshot in
    state/cache.py; tests/state/test_resume.py)."""

    def __init__(self, out: FastCounts, exact: _Exact | None) -> None:
        self.out = out
        self.exact = exact
        self.pending: list[str] = []  # call ids still waiting for their result, in call order
        self.k = 0
        self.seen: set[str] = set()
        self.last_role = ""

    def _emit(self, role: str, chars: int, texts: list[str]) -> None:
        out = self.out
        out.messages[role] = out.messages.get(role, 0) + 1
        out.chars += chars
        out.heuristic.append((chars + 3) // 4)
        self.last_role = role
        if self.exact is not None:
            self.exact.add(texts, 0, None)

    def _missing(self) -> None:
        # the cleaner's synthetic result for each unanswered call, placed right after the call's turn
        for _ in range(len(self.pending) - self.k):
            self._emit("tool", len(NO_RESPONSE), [NO_RESPONSE])
            self.out.repairs += 1

    def feed(self, items: Iterable[tuple[int, FastLine, int | None]]) -> None:
        out, exact, seen = self.out, self.exact, self.seen
        msgs = out.messages
        heur = out.heuristic
        pending, k, role = self.pending, self.k, self.last_role
        for lineno, line, known in items:
            out.records += 1
            if line.role == "tool":
                if k >= len(pending) or line.result_id != pending[k]:
                    raise NotFast("a result the cleaner would move or turn into text")
                k += 1
            else:
                if k < len(pending):
                    self.pending, self.k = pending, k
                    self._missing()
                for cid in line.call_ids:
                    if cid in seen:
                        raise NotFast("repeated call id")
                    seen.add(cid)
                pending, k = line.call_ids, 0
                out.tool_calls += len(line.call_ids)
            if line.prompt_tokens is not None and line.prompt_tokens > 0:
                out.usage.append((len(heur), lineno, line.prompt_tokens))
            # _emit(), inlined: once per line
            role = line.role
            msgs[role] = msgs.get(role, 0) + 1
            out.chars += line.chars
            if role == "system":
                out.system.append(len(heur))
            heur.append((line.chars + 3) // 4 + line.fixed)
            if exact is not None:
                exact.add(line.texts, line.fixed, known)
            self.last_role = role
        self.pending, self.k, self.last_role = pending, k, role

    def finish(self) -> FastCounts:
        """The counts of the whole walk, with the repairs the end of the file calls for."""
        if self.k < len(self.pending):
            self._missing()
        if self.last_role == "tool":
            self._emit("assistant", len(UNDERSTOOD), [UNDERSTOOD])
            self.out.repairs += 1
        if self.exact is not None:
            self.exact.flush()
            self.out.exact = self.exact.out
        return self.out


# -------------------------------------------------------------------- exact counts on worker processes


def _can_fork() -> bool:
    import multiprocessing

    # a worker (of `estimate --jobs`) counts on its own: the other cores already have files to do
    return (sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()
            and multiprocessing.parent_process() is None)


def _ranges(path: str | Path, size: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` byte ranges of the file that start and end at line starts."""
    cuts = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(max(cuts[-1], size * i // parts))
            if f.tell() > 0:
                f.seek(f.tell() - 1)  # a cut right after a newline is already a line start
                f.readline()
            cuts.append(min(size, f.tell()))
    cuts.append(size)
    from itertools import pairwise

    return list(pairwise(cuts))


# (lineno relative to the range, FastLine without texts, exact tokens of its text)
_Counted = tuple[int, FastLine, int]


def _count_range(args: tuple[str, int, int, str, str]) -> tuple[list[_Counted], int] | str:
    """Worker: decode, read and count exactly every line of one byte range. Returns (lines, physical lines
    in the range), or the reason it cannot (the parent then takes the full path)."""
    path, start, end, name, encoding = args
    from ..formats import get_format
    from .exact import get_encoding

    enc = get_encoding(encoding)  # inherited from the parent through fork: not parsed again
    reader = get_format(name).fast_line
    assert reader is not None  # checked by count_file before the workers start
    out: list[_Counted] = []
    lineno = 0
    try:
        with open(path, "rb") as f:
            f.seek(start)
            pos = start
            for chunk in f:
                lineno += 1
                pos += len(chunk)
                line = chunk
                if line.endswith(b"\n"):
                    line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                if start == 0 and lineno == 1 and line.startswith(_BOM):
                    line = line[len(_BOM):]
                if line and not line.isspace():
                    info = reader(_decode(line), True)
                    n = len(enc.encode_ordinary("\n".join(info.texts or [])))
                    out.append((lineno, info._replace(texts=None), n))
                if pos >= end:
                    break
    except (NotFast, OSError) as exc:
        return str(exc) or type(exc).__name__
    return out, lineno


def _parallel_lines(path: str | Path, size: int, name: str, encoding: str,
                    jobs: int) -> Iterator[tuple[int, FastLine, int]]:
    import multiprocessing

    # more ranges than workers: a range of large records cannot leave the other workers idle for long
    ranges = _ranges(path, size, jobs * 4)
    tasks = [(str(path), a, b, name, encoding) for a, b in ranges if b > a]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        base = 0
        for result in pool.imap(_count_range, tasks):
            if isinstance(result, str):
                raise NotFast(result)
            counted, nlines = result
            for lineno, info, n in counted:
                yield base + lineno, info, n
            base += nlines


def _decode(raw: bytes) -> Any:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise NotFast("a line does not decode") from None
    if type(obj) is not dict:
        raise NotFast("a line is not an object")
    return obj


# ----------------------------------------------------------------------------- resumable counts for run

_SNAPSHOT_VERSION = 1


def walk_bytes(data: bytes, fmt: str, encoding: str | None, conforms: Any,
               resume: dict[str, Any] | None) -> tuple[FastCounts, dict[str, Any] | None]:
    """The fast counts of a whole transcript held as ``data`` (every line ends with a newline), walking only
    the bytes after ``resume`` (a snapshot this function returned for a prefix of ``data``, checked by the
    caller). Returns the counts and the snapshot for the next call. A snapshot whose format was detected from
    fewer lines than detection reads is used only if the grown file is detected the same way.

    ``conforms(obj)`` is the schema check of ``run``: a line that fails it, a blank line, or anything the
    walk would repair differently raises NotFast (the full path then reports or repairs it)."""
    from ..formats import DETECT_LINES, get_format

    start = 0
    lineno = 0
    if resume is not None and resume.get("complete") and fmt == "auto":
        # detected from every line of a short file: a grown file is judged from more lines
        head = [loads_line for loads_line in data.split(b"\n", DETECT_LINES)[:DETECT_LINES] if loads_line]
        try:
            objs_head = [orjson.loads(x) for x in head]
        except orjson.JSONDecodeError:
            raise NotFast("a line does not decode") from None
        again = _detect(objs_head, list(range(1, len(objs_head) + 1)), data.count(b"\n") < DETECT_LINES)
        if again != resume["format"]:
            resume = None
    if resume is not None:
        name = resume["format"]
        walk = _restore(resume, encoding)
        start, lineno = resume["bytes"], resume["lines"]
        lines = data[start:].split(b"\n")
    else:
        lines = data.split(b"\n")
    lines.pop()  # after the final newline
    loads = orjson.loads
    objs: list[Any] = []
    for line in lines:
        if not line or line.isspace():
            raise NotFast("a blank line")  # the full path drops it: the output would differ
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            raise NotFast("a line does not decode") from None
        if type(obj) is not dict:
            raise NotFast("a line is not an object")
        objs.append(obj)
    complete = lineno + len(objs) < DETECT_LINES  # every line was read for detection
    if resume is None:
        head = objs[:DETECT_LINES]
        name = fmt
        if fmt == "auto":
            name = _detect(head, list(range(1, len(head) + 1)), complete) if head else "openai"
        walk = Walk(FastCounts(format=name, records=0), _Exact(encoding) if encoding else None)
    fmt_obj = get_format(name)
    reader = fmt_obj.fast_line
    if reader is None:
        raise NotFast(f"no fast reader for {name}")
    schema = fmt_obj.schema_file
    want_text = walk.exact is not None

    def items() -> Iterator[tuple[int, FastLine, None]]:
        for n, obj in enumerate(objs, lineno + 1):
            if schema and not conforms(schema, obj):
                raise NotFast("a line the schema check would report")
            yield n, reader(obj, want_text), None

    walk.feed(items())
    if walk.exact is not None:
        walk.exact.flush()
    snap = _snapshot(walk, name, len(data), lineno + len(objs))
    snap["complete"] = complete and fmt == "auto"
    return walk.finish(), snap


def _snapshot(walk: Walk, name: str, size: int, lines: int) -> dict[str, Any]:
    out = walk.out
    return {
        "v": _SNAPSHOT_VERSION, "format": name, "bytes": size, "lines": lines, "records": out.records,
        "messages": list(out.messages.items()), "tool_calls": out.tool_calls, "chars": out.chars,
        "heuristic": out.heuristic.tobytes(), "system": out.system.tobytes(), "usage": list(out.usage),
        "repairs": out.repairs, "pending": list(walk.pending), "k": walk.k, "seen": list(walk.seen),
        "last_role": walk.last_role,
        "exact": walk.exact.out.tobytes() if walk.exact is not None else None,
    }


def _restore(snap: dict[str, Any], encoding: str | None) -> Walk:
    out = FastCounts(format=snap["format"], records=snap["records"], messages=dict(snap["messages"]),
                     tool_calls=snap["tool_calls"], chars=snap["chars"], repairs=snap["repairs"],
                     usage=[tuple(u) for u in snap["usage"]])
    out.heuristic.frombytes(snap["heuristic"])
    out.system.frombytes(snap["system"])
    exact = None
    if encoding is not None:
        exact = _Exact(encoding)
        exact.out.frombytes(snap["exact"])
    walk = Walk(out, exact)
    walk.pending, walk.k, walk.seen, walk.last_role = list(snap["pending"]), snap["k"], set(snap["seen"]), \
        snap["last_role"]
    return walk
