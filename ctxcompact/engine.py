"""The composition of every part (docs/concepts/state.md#the-watermark): read → validate → apply the state →
clean → estimate → compact if over the threshold → write the output and the state.

``estimate`` and ``run`` build the same effective context (:mod:`.context`), count it (:mod:`.tokens`),
calibrate it and take the threshold decision (:mod:`.report`); ``run`` then hands it to the chosen strategy
(:mod:`.strategies`) and records what the strategy did in the state. This module only composes: every rule
lives in the module it names. It is the entry (``estimate``, ``run``, ``run_held``, ``calibrate``'s
``record_real_tokens``) and the choice of route; the routes are their own modules: :mod:`.route_estimate`,
:mod:`.route_file` (a file not held: pass-through and streamed compaction), :mod:`.route_held`, over
:mod:`.run_write` (the output and the state) and :mod:`.run_setup` (the state's path, the budget, the count
cache).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, BinaryIO

from .budget import Budget
from .context import Reread
from .errors import InputError, StateError, UsageError
from .options import LOCK_TIMEOUT, MAX_TOKENS, Options, check_options
from .paths import check_paths, check_side_files, spooled, spooled_fifo
from .plugins import STRATEGIES
from .result import RunResult, Warn, output_format
from .route_estimate import estimate
from .route_file import run_file
from .route_held import run_locked
from .run_setup import (
    budget_for,
    input_path,
    is_fifo_source,
    named,
    note_document,
    option_reads,
    resolve_state_path,
    stderr_warn,
)
from .source import InputData, Source, is_file, is_stdin
from .state import State, load_state, save_state, state_lock
from .state import record_real_tokens as record_in_state
from .tokens.cache import CountCache
from .tokens.counts import check_exact

__all__ = ["RunResult", "Warn", "estimate", "input_path", "option_reads", "output_format",
           "record_real_tokens", "resolve_state_path", "run", "run_held", "stderr_warn"]


def run(source: Source, opts: Options | None = None, *, output: Path | BinaryIO | None = None,
        dry_run: bool = False, warn: Warn = stderr_warn, hold: bool = False) -> RunResult:
    """validate → apply the state → clean → estimate → compact if over the threshold → write output and state.

    ``output``: a path (written atomically), a binary stream, or None (nothing written; the caller can use
    ``RunResult.lines()``). With ``dry_run`` nothing is written at all, not even the state.

    A file is read in two passes by byte offset (:mod:`.streaming`) instead of held, when it may be: a
    context that passes through is then written without ever holding the file. ``RunResult.transcript``
    and ``.context`` are still the held route's, made from the bytes the run read when first read
    (``RunResult.held``), so a caller that reads only the figures and ``lines()`` never holds the file. The
    report's ``maskable_tokens`` is null on that route (it needs the whole context; ``estimate`` gives it).
    ``hold=True`` takes the held route whatever the input (the tests compare the two).

    Stdin (``-``) or a FIFO (a named pipe, ``<(cmd)``) with an ``output`` takes the file's route through a
    private temporary copy (``paths.spooled``), named as the held route names it (stdin: no path; a FIFO:
    its path); the copy is gone when ``run`` returns, so such a result's records are not read again
    (reading them raises InputError): with ``output=None``, the input is held as before.
    """
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    STRATEGIES.check(opts.strategy)  # an unknown name is a usage error before any work (nothing loaded)
    budget = budget_for(opts)
    state_path = resolve_state_path(source, opts, required=not dry_run)
    if not dry_run:
        check_paths(input=input_path(source), output=output if isinstance(output, Path) else None,
                    state=state_path, reads=option_reads(opts))
        if state_path is not None:
            check_side_files(state_path)
    if not hold and not dry_run and is_file(source) and Path(source).is_file():  # type: ignore[arg-type]
        path = Path(source)  # type: ignore[arg-type]
        return _run_file_locked(path, opts, budget, state_path, output, warn, path)
    if not hold and not dry_run and output is not None and (is_stdin(source) or is_fifo_source(source)):
        name = None if is_stdin(source) else Path(source)  # type: ignore[arg-type]
        # (before the lock, as stdin and a FIFO were always read)
        with spooled(sys.stdin.buffer) if name is None else spooled_fifo(name) as got:
            if isinstance(got, bytes):
                return _run_input(named(InputData.load(got), name), opts, budget, state_path, output, warn)
            return _gone(_run_file_locked(got, opts, budget, state_path, output, warn, name), name)
    return _run_input(InputData.load(source), opts, budget, state_path, output, warn, dry_run)


def _run_file_locked(path: Path, opts: Options, budget: Budget, state_path: Path | None,
                     output: Path | BinaryIO | None, warn: Warn, name: Path | None) -> RunResult:
    if state_path is None:
        return run_file(path, opts, budget, None, output, warn, name)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return run_file(path, opts, budget, state_path, output, warn, name)


def _gone(result: RunResult, name: Path | None) -> RunResult:
    """A result of stdin or a FIFO read through its spool file, which is removed as ``run`` returns: what
    would read it again (``lines()``, ``transcript``, ``context``, when not read yet) says so instead."""
    def gone() -> Any:
        raise InputError(f"{name or 'stdin'} was read through a temporary copy that is gone: its records "
                         "cannot be read again (run with output=None to hold them, or read a file)")

    if result.streamed is not None:
        result.streamed = gone
    if result.held is not None:
        result.held = gone
    return result


def _run_input(inp: InputData, opts: Options, budget: Budget, state_path: Path | None,
               output: Path | BinaryIO | None, warn: Warn, dry_run: bool = False) -> RunResult:
    """``run`` of the input held (the held route)."""
    note_document(inp, warn)
    if state_path is None or dry_run:
        return run_locked(inp, opts, budget, state_path, output, dry_run, warn)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return run_locked(inp, opts, budget, state_path, output, dry_run, warn)


def run_held(data: bytes, opts: Options, state: State | None, *, path: Path | None = None,
             counts: CountCache | Path | None = None, warn: Warn = stderr_warn,
             reread: Reread | None = None) -> RunResult:
    """``run`` on a transcript in memory with a state the caller holds (the message-list API,
    :mod:`ctxcompact.messages`): the same pipeline, fast path included; nothing is written but the count
    cache. ``result.state`` is the state to keep; the one given is not changed, so a failure leaves the
    caller's state as it was. ``path`` names where the transcript is kept, if anywhere (the state's
    ``input.path``); ``counts`` the count cache: held in memory, or beside a state file (under its lock).
    A message list is the context itself, not an agent's append-only log: the compacted records are the
    output (no ``formats.jsonl.compaction_output``). ``reread``: what the caller's last call on this
    transcript kept (``context.Reread``): a transcript grown at its end is read, finished and cleaned only
    after the parts the cleaner settled then."""
    check_options(opts)  # the same checks as every other route, before any work
    check_exact(opts)
    STRATEGIES.check(opts.strategy)
    held = copy.deepcopy(state) if state is not None and not opts.reset_state else None
    return run_locked(InputData(data, path), opts, budget_for(opts), None, None, False, warn, held=held,
                      counts=counts if counts is not None else CountCache(), as_log=False, reread=reread)


# --------------------------------------------------------------------------------------------------------
# calibrate


def record_real_tokens(state_path: Path, prompt_tokens: int, lock_timeout: float = LOCK_TIMEOUT) -> State:
    """``ctxcompact calibrate``: store what the provider reported for the last request (after-model hook)."""
    if not 0 <= prompt_tokens <= MAX_TOKENS:
        raise UsageError(f"--prompt-tokens must be between 0 and {MAX_TOKENS:,}, got {prompt_tokens}")
    check_side_files(state_path)
    with state_lock(state_path, timeout=lock_timeout):
        state = load_state(state_path)
        if state is None:
            raise StateError(f"no state file at {state_path}: run `ctxcompact run` first")
        record_in_state(state, prompt_tokens)
        save_state(state_path, state)
        return state
