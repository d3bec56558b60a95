"""The library API (§12): everything the CLI does, callable in-process.

An agent framework calls :func:`run` from its before-model hook and :func:`calibrate` from its after-model
hook; a batch job calls :func:`estimate` over many files without a subprocess per transcript.

    >>> from ctxcompact import api
    >>> report = api.estimate("samples/openai-long.jsonl", api.Options(window=32_000, exact="none"))
    >>> report.would_compact
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ExitCode, InputError, Problem, StateError, SummarizerError, UsageError
from .model import Transcript
from .options import Options
from .pipeline import EstimateReport, RunResult, Source, Warn, _stderr_warn, estimate, record_real_tokens, run
from .state import State, load_state, reset_state, save_state


def load_transcript(
    source: Source, fmt: str = "auto", *, lenient: bool = False, schema: bool = True
) -> Transcript:
    """Read a transcript (path, bytes or binary stream) into the model. Raises InputError when invalid."""
    from .formats import read_transcript
    from .pipeline import InputData

    data = InputData.load(source)
    import io

    return read_transcript(io.BytesIO(data.data), fmt, lenient=lenient, schema=schema).transcript


def validate(source: Source, fmt: str = "auto", *, lenient: bool = False) -> Any:
    """Schema and cross-record validation; returns a ValidationReport (``.ok``, ``.problems``)."""
    from .validate import validate as _validate

    return _validate(source, fmt, lenient=lenient)


def clean(transcript: Transcript) -> Any:
    """§4 repairs on a loaded transcript; returns CleanResult(transcript, repairs)."""
    from .clean import clean as _clean

    return _clean(transcript)


@dataclass(slots=True)
class CleanFileResult:
    transcript: Transcript
    output_format: str
    repairs: list[Any]
    problems: list[Problem] = field(default_factory=list)

    def lines(self) -> Iterator[bytes]:
        from .formats import lines_in

        return lines_in(self.transcript, self.output_format)


def clean_file(
    source: Source,
    fmt: str = "auto",
    *,
    lenient: bool = False,
    to: str | None = None,
    warn: Warn = _stderr_warn,
    keep_trailing_results: bool = False,
) -> CleanFileResult:
    """Read, validate per line and clean a transcript; ``.lines()`` gives the output (in ``to``, or the
    input's format)."""
    import io

    from .clean import clean as _clean
    from .formats import read_transcript
    from .pipeline import InputData, _output_format

    data = InputData.load(source)
    result = read_transcript(io.BytesIO(data.data), fmt, lenient=lenient, schema=True)
    cleaned = _clean(result.transcript, close_trailing=not keep_trailing_results)
    out_format = _output_format(Options(to=to), cleaned.transcript, warn)
    return CleanFileResult(cleaned.transcript, out_format, list(cleaned.repairs), list(result.problems))


def calibrate(state_path: Path | str, prompt_tokens: int) -> State:
    """After-model hook: record the prompt tokens the provider reported for the request just sent."""
    return record_real_tokens(Path(state_path), prompt_tokens)


__all__ = [
    "CleanFileResult",
    "EstimateReport",
    "ExitCode",
    "InputError",
    "Options",
    "Problem",
    "RunResult",
    "State",
    "StateError",
    "SummarizerError",
    "Transcript",
    "UsageError",
    "calibrate",
    "clean",
    "clean_file",
    "estimate",
    "load_state",
    "load_transcript",
    "reset_state",
    "run",
    "save_state",
    "validate",
]
