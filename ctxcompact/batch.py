"""Estimate many transcripts at once: expand paths, directories and globs, spread the files over processes,
and give one row per file (in input order) plus totals.

A file that fails (invalid, unreadable, a state that does not match) gives an error row; the other files go
on. Work is spread over worker processes, not threads: parsing is Python code that holds the GIL. Workers
are forked where the platform allows it, so they start in milliseconds and inherit what the parent already
loaded (the tiktoken ranks are parsed once, in the parent, before the pool starts). One file, or
``jobs=1``, runs in-process with no pool at all.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CtxCompactError, UsageError
from .options import Options

#: file names a directory is searched for
PATTERNS = ("*.jsonl",)
_GLOB_CHARS = frozenset("*?[")


@dataclass(slots=True)
class Row:
    """One file's result: its estimate report (``to_json()``), or the error that stopped it."""

    path: str
    report: dict[str, Any] | None = None
    error: str | None = None
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        if self.report is not None:
            return {"file": self.path, **self.report}
        return {"file": self.path, "error": self.error, "exit_code": self.exit_code}


@dataclass(slots=True)
class Totals:
    files: int = 0
    failed: int = 0
    records: int = 0
    messages: int = 0
    tool_calls: int = 0
    chars: int = 0
    heuristic: int = 0
    exact: int | None = None
    calibrated: int = 0
    would_compact: int = 0
    formats: dict[str, int] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        self.files += 1
        r = row.report
        if r is None:
            self.failed += 1
            return
        self.records += r["records"]
        self.messages += sum(r["messages"].values())
        self.tool_calls += r["tool_calls"]
        self.chars += r["chars"]
        tokens = r["tokens"]
        self.heuristic += tokens["heuristic"]
        if tokens["exact"] is not None:
            self.exact = (self.exact or 0) + tokens["exact"]
        self.calibrated += tokens["calibrated"]
        self.would_compact += bool(r["would_compact"])
        self.formats[r["format"]] = self.formats.get(r["format"], 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "failed": self.failed,
            "records": self.records,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "chars": self.chars,
            "tokens": {"heuristic": self.heuristic, "exact": self.exact, "calibrated": self.calibrated},
            "would_compact": self.would_compact,
            "formats": dict(sorted(self.formats.items())),
        }


def expand(args: Sequence[str], recursive: bool = False) -> list[str]:
    """The files named by ``args``, in order, each once: a file as given, a directory's ``*.jsonl`` files
    (in subdirectories too with ``recursive``), a glob's matches (``**`` with ``recursive``), sorted.

    A path that does not exist is kept (its row will say so); a glob that matches nothing is a UsageError."""
    out: list[str] = []
    seen: set[str] = set()

    def take(p: str) -> None:
        if p not in seen:
            seen.add(p)
            out.append(p)

    for arg in args:
        if arg == "-":
            raise UsageError("stdin (-) cannot be one of several inputs; give file paths")
        path = Path(arg)
        if path.is_dir():
            found: set[Path] = set()
            for pattern in PATTERNS:
                if recursive:
                    found.update(f for f in walk_files(path) if fnmatch.fnmatch(f.name, pattern)
                                 and not f.name.startswith("."))
                else:
                    found.update(path.glob(pattern))
            for p in sorted(f for f in found if f.is_file()):
                take(str(p))
        elif not path.exists() and _GLOB_CHARS & set(arg):
            if recursive and "**" in arg:
                matches = _recursive_glob(arg)
            else:
                matches = sorted(m for m in glob.glob(arg) if Path(m).is_file())
            if not matches:
                raise UsageError(f"no file matches {arg!r}")
            for m in matches:
                take(m)
        else:
            take(arg)
    return out


def error_row(path: str, exc: Exception) -> Row:
    """The row of a file whose work raised ``exc``: what every multi-file command (``estimate``, ``eval``)
    reports for it before going on with the other files (docs/reference/exit-codes.md)."""
    if isinstance(exc, CtxCompactError):
        return Row(path, None, str(exc), int(exc.exit_code))
    if isinstance(exc, OSError):
        return Row(path, None, f"cannot read {path}: {exc.strerror or exc}", 1)
    # a bug of ours must not stop the other files
    return Row(path, None, f"internal error: {type(exc).__name__}: {exc}", 1)


def cores() -> int:
    """The processors this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def walk_files(root: Path) -> Iterator[Path]:
    """Every file under ``root``, in name order, each folder visited once: links to folders are followed,
    but a folder already seen (by device and inode) is not entered again, so links that loop end the walk
    instead of making it endless (docs/reference/safety.md)."""
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subfolders = []
        for entry in entries:
            try:
                if entry.is_dir():
                    subfolders.append(Path(entry.path))
                elif entry.is_file():
                    yield Path(entry.path)
            except OSError:
                continue
        stack.extend(reversed(subfolders))


def _recursive_glob(pattern: str) -> list[str]:
    """The files matching a ``**`` glob, walking the folder before its first wildcard once
    (:func:`walk_files`). ``**`` matches any number of folders; ``*``, ``?`` and ``[…]`` stay within one
    name; a name starting with a dot matches only a pattern name that starts with one (as :mod:`glob`)."""
    parts = pattern.split("/")
    fixed = 0
    while fixed < len(parts) - 1 and not _GLOB_CHARS & set(parts[fixed]):
        fixed += 1
    root = "/".join(parts[:fixed]) or ("/" if pattern.startswith("/") else "")
    regex = ""
    rest = parts[fixed:]
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        if part == "**":
            regex += r"(?:(?!\.)[^/]*/)*" + (r"(?!\.)[^/]*" if last else "")
        else:
            regex += _component(part) + ("" if last else "/")
    matcher = re.compile(regex + r"\Z", re.DOTALL)
    out = []
    for f in walk_files(Path(root or ".")):
        rel = os.path.relpath(f, root or ".").replace(os.sep, "/")
        if matcher.match(rel):
            out.append(os.path.join(root, rel) if root else rel)
    return sorted(out)


def _component(part: str) -> str:
    """One name of a glob as a regex (``*``, ``?``, ``[…]``, ``[!…]``)."""
    out = "" if part.startswith(".") else r"(?!\.)"
    i = 0
    while i < len(part):
        c = part[i]
        end = part.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif end > 0:
            body = part[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out += "[" + body.replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out


def estimate_one(path: str, opts: Options) -> Row:
    """Estimate one file; never raises for a problem of that file."""
    from .engine import estimate

    try:
        return Row(path, estimate(path, opts).to_json())
    except Exception as exc:
        return error_row(path, exc)


def _work(args: tuple[str, Options]) -> Row:
    return estimate_one(*args)


def estimate_many(paths: Sequence[str], opts: Options, jobs: int | None = None) -> Iterator[Row]:
    """One row per path, in the order given, computed on ``jobs`` processes (default: all cores)."""
    if opts.state_path is not None and len(paths) > 1:
        raise UsageError("--state names one state file; with several inputs each uses its own "
                         "(<input>.ctxstate.json, or one in --state-dir), or give --no-state")
    jobs = min(jobs or cores(), len(paths))
    if jobs <= 1:
        for p in paths:
            yield estimate_one(p, opts)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if opts.exact == "tiktoken":
        from .tokens.counts import encoding_name
        from .tokens.exact import get_encoding

        get_encoding(encoding_name(opts))  # parsed once here; forked workers inherit it
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods and sys.platform != "darwin" else None)
    # chunks keep the per-task overhead small on many small files yet balance the load at the end
    chunk = max(1, min(64, len(paths) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        yield from pool.map(_work, [(p, opts) for p in paths], chunksize=chunk)


def summarize(rows: Sequence[Row]) -> Totals:
    totals = Totals()
    for row in rows:
        totals.add(row)
    return totals
