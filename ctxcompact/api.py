"""The library API (docs/guides/frameworks.md#the-library-api): everything the CLI does, callable in-process.

An agent framework calls :func:`run` from its before-model hook and :func:`calibrate` from its after-model
hook; a batch job calls :func:`estimate` (or :func:`estimate_many`) over many files without a subprocess per
transcript.

    >>> from ctxcompact import api
    >>> report = api.estimate("samples/openai-long.jsonl", api.Options(window=32_000, exact="none"))
    >>> report.would_compact
    True
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .atomic import write_lines
from .clean import CleanResult
from .clean import clean as _clean
from .engine import (
    RunResult,
    estimate,
    record_real_tokens,
    resolve_state_path,
    run,
)
from .errors import ExitCode, InputError, Problem, StateError, SummarizerError, UsageError
from .formats import read_transcript
from .model import Transcript
from .options import LOCK_TIMEOUT, Options
from .paths import check_paths, check_writes
from .progress import bar as progress_bar
from .progress import set_quiet as quiet_progress
from .report import EstimateReport
from .source import InputData, Source
from .state import State, check_is_state, load_state, save_state, state_lock
from .state import reset_state as _reset_state

if TYPE_CHECKING:
    from .batch import Row, Totals, error_row
    from .clean_file import CleanFileResult, clean_file
    from .evaluate import Probe, evaluate, load_probes
    from .evaluate.html import page as eval_html
    from .evaluate.render import chart as eval_chart
    from .evaluate.render import table as eval_table
    from .evaluate.replay import replay
    from .messages import CompactResult, Session, acompact, compact
    from .recall import Hit, Recall, recall
    from .tokens.usage import PromptUsage, load_usage_json
    from .tokens.usage import prompt_tokens as usage_prompt_tokens
    from .validate import ValidationReport

# Loaded on first use, so a hook's `run` does not import the evaluation, the message-list API (asyncio), the
# process pool, recall, the billed usage's reader or `clean`'s result class: name -> (module, attribute)
_LAZY = {
    "CleanFileResult": ("clean_file", "CleanFileResult"), "clean_file": ("clean_file", "clean_file"),
    "Row": ("batch", "Row"), "Totals": ("batch", "Totals"), "error_row": ("batch", "error_row"),
    "Probe": ("evaluate", "Probe"), "evaluate": ("evaluate", "evaluate"),
    "load_probes": ("evaluate", "load_probes"),
    "eval_html": ("evaluate.html", "page"), "eval_chart": ("evaluate.render", "chart"),
    "eval_table": ("evaluate.render", "table"), "replay": ("evaluate.replay", "replay"),
    "CompactResult": ("messages", "CompactResult"), "Session": ("messages", "Session"),
    "acompact": ("messages", "acompact"), "compact": ("messages", "compact"),
    "Hit": ("recall", "Hit"), "Recall": ("recall", "Recall"), "recall": ("recall", "recall"),
    "ValidationReport": ("validate", "ValidationReport"),
    "PromptUsage": ("tokens.usage", "PromptUsage"), "load_usage_json": ("tokens.usage", "load_usage_json"),
    "usage_prompt_tokens": ("tokens.usage", "prompt_tokens"),
}


def __getattr__(name: str) -> object:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"ctxcompact.{module}"), attr)
    globals()[name] = value
    return value

def load_transcript(source: Source, fmt: str = "auto", *, lenient: bool = False,
                    schema: bool = True) -> Transcript:
    """Read a transcript (path, bytes or binary stream) into the model. Raises InputError when invalid."""
    data = InputData.load(source)
    return read_transcript(io.BytesIO(data.data), fmt, lenient=lenient, schema=schema).transcript


def validate(source: Source, fmt: str = "auto", *, lenient: bool = False) -> ValidationReport:
    """Schema and cross-record validation; returns a ValidationReport (``.ok``, ``.problems``)."""
    from .validate import validate as _validate

    return _validate(source, fmt, lenient=lenient)


def clean(transcript: Transcript) -> CleanResult:
    """The repairs on a loaded transcript; returns CleanResult(transcript, repairs)."""
    return _clean(transcript)


def estimate_many(paths: Sequence[str], opts: Options, jobs: int | None = None) -> Iterator[Row]:
    """One row per file (in the order given), on ``jobs`` processes (default: all cores); a file that fails
    gives an error row and the others go on. :func:`expand_paths` turns directories and globs into files."""
    from .batch import estimate_many as _estimate_many

    return _estimate_many(paths, opts, jobs)


def expand_paths(args: Sequence[str], recursive: bool = False) -> list[str]:
    """The files named by paths, directories (their ``*.jsonl``) and globs, each once, in order."""
    from .batch import expand

    return expand(args, recursive)


def write_output(lines: Iterable[bytes], output: str | Path | BinaryIO) -> None:
    """Write output lines (``RunResult.lines()``, ``CleanFileResult.lines()``) to a path, atomically, or to a
    binary stream."""
    write_lines(lines, output)


def calibrate(state_path: Path | str, prompt_tokens: int) -> State:
    """After-model hook: record the prompt tokens the provider reported for the request just sent."""
    return record_real_tokens(Path(state_path), prompt_tokens)


def state_path(source: Source, opts: Options) -> Path | None:
    """Where ``run`` keeps the state of ``source`` with these options (``--state``, ``--state-dir`` or beside
    the input); None with ``use_state=False``. Stdin without ``--state`` is a UsageError."""
    return resolve_state_path(source, opts, required=True)


def reset_state(path: Path | str, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Delete a state file (the next run starts from scratch), under its lock; True when there was one."""
    if not check_is_state(path):  # before the lock: a slip of the tab key leaves no lock file behind
        return False
    with state_lock(Path(path), timeout=lock_timeout):
        return _reset_state(Path(path))


__all__ = [
    "CleanFileResult",
    "CompactResult",
    "EstimateReport",
    "ExitCode",
    "Hit",
    "InputError",
    "Options",
    "Probe",
    "Problem",
    "PromptUsage",
    "Recall",
    "Row",
    "RunResult",
    "Session",
    "State",
    "StateError",
    "SummarizerError",
    "Totals",
    "Transcript",
    "UsageError",
    "acompact",
    "calibrate",
    "check_paths",
    "check_writes",
    "clean",
    "clean_file",
    "compact",
    "error_row",
    "estimate",
    "estimate_many",
    "eval_chart",
    "eval_html",
    "eval_table",
    "evaluate",
    "expand_paths",
    "load_probes",
    "load_state",
    "load_transcript",
    "load_usage_json",
    "progress_bar",
    "quiet_progress",
    "recall",
    "replay",
    "reset_state",
    "run",
    "save_state",
    "state_path",
    "usage_prompt_tokens",
    "validate",
    "write_output",
]
