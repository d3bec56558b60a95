"""What every route of ``estimate`` and ``run`` sets up before reading: where the state lives
(docs/concepts/state.md#the-state-file), the budget, where warnings go, the count cache and the settled prefix
it proves, the summarizer's configuration check."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from .budget import Budget, make_budget
from .errors import SummarizerError, UsageError
from .options import Options
from .paths import is_fifo, state_path_in
from .plugins import OFFLINE, SUMMARIZERS
from .secrets import scrub_credentials
from .source import InputData, Source, is_file
from .state import default_state_path
from .state.cache import cache_path, load_counts
from .streaming import CacheLoader
from .tokens.cache import CountCache


def stderr_warn(message: str) -> None:
    """The default place for warnings: one ``ctxcompact: …`` line on stderr."""
    sys.stderr.write(f"ctxcompact: {scrub_credentials(message)}\n")


def resolve_state_path(source: Source, opts: Options, *, required: bool) -> Path | None:
    """Where the state lives: --state, else in --state-dir named after a file input, else beside it; stdin
    needs --state or --no-state."""
    if not opts.use_state:
        return None
    if opts.state_path is not None:
        return Path(opts.state_path)
    if is_file(source):
        path = Path(source)  # type: ignore[arg-type]
        beside = default_state_path(path)
        return beside if opts.state_dir is None else state_path_in(Path(opts.state_dir), path, beside)
    if required:
        why = " (--state-dir names a state after its input file; stdin has no name)" * bool(opts.state_dir)
        raise UsageError(f"reading stdin: give --state PATH to keep the state, or --no-state{why}")
    return None


def input_path(source: Source) -> Path | None:
    """The input as a path for the write check: a file, ``-`` for stdin, None for bytes or a stream."""
    if isinstance(source, (str, Path)):
        return Path(source)
    return None


def option_reads(opts: Options) -> list[tuple[str, Path | None]]:
    """The files the options name for reading: no command may write over them (paths.check_writes)."""
    return [("--todos file", opts.todos_file), ("config file", opts.config_path)]


def budget_for(opts: Options) -> Budget:
    return make_budget(opts.window, opts.model, opts.threshold, opts.config_path)


def is_fifo_source(source: Source) -> bool:
    return is_file(source) and is_fifo(Path(source))  # type: ignore[arg-type]


def note_document(inp: InputData, warn: Callable[[str], None]) -> None:
    """Say how an input that is one JSON document is read (``source.InputData.document``): every route that
    holds the input says it, before its work."""
    if inp.document is not None:
        warn(f"note: the input is {inp.document}, one JSON document: read as JSONL, one record per line "
             "(line N is its record N), and written as JSONL")


def named(inp: InputData, name: Path | None) -> InputData:
    """Spooled bytes named as the held route names their input (stdin: no path; a FIFO: its path)."""
    return inp if name is None else dataclasses.replace(inp, path=name)


def cache_loader(state_path: Path | None, source: Path) -> CacheLoader | None:
    if state_path is None:
        return None
    return lambda key: load_counts(cache_path(state_path), key, _size(source))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def count_cache(counts: CountCache | Path | None, state_path: Path | None,
                input_bytes: int) -> tuple[CountCache | None, Path | None]:
    """The count cache of this call, not yet begun (``CountCache.use`` once the format is known): held by
    the caller, or kept beside the state (``counts`` names the state file of a caller that holds the lock),
    and the file to keep it in."""
    if isinstance(counts, CountCache):
        return counts, None
    at = counts if counts is not None else state_path
    if at is None:
        return None, None  # no state: nothing to keep the counts in
    return load_counts(cache_path(at), None, input_bytes), cache_path(at)


def proven(cache: CountCache | None, inp: InputData) -> tuple[str, int] | None:
    """The settled prefix of the last call, if the input still starts with it: (its format, its bytes)."""
    if cache is None or cache.format is None or not cache.prove(inp.data):
        return None
    return cache.format, cache.proven


def check_summarizer(opts: Options) -> None:
    if not SUMMARIZERS.has(opts.summarizer, OFFLINE):
        from .summarizers import summarizer_for  # (an offline one needs no check: a run never loads them)

        try:
            summarizer_for(opts).check()  # a missing key is a configuration error, reported before any work
        except SummarizerError as exc:
            raise UsageError(str(exc)) from None
