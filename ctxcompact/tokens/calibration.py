"""Calibration: turn a local estimate into the provider's token space, never undercounting (README "Token
estimation and calibration").

With the provider's reported prompt tokens of the last request (``real``) and our estimate of that same
request (``last_estimate``)::

    factor     = clamp(real / last_estimate, 1.0, 5.0)
    calibrated = ceil(current × factor)
    tokens     = max(real, calibrated)

``current`` tracks growth since that request (new tool results), ``factor`` says how far our counter was off
last time, and ``real`` is a floor: a transcript does not shrink between two requests. The clamp keeps one odd
turn (huge JSON) from distorting every later turn, and the floor at 1.0 keeps a low ``real`` (e.g. right after
a compaction) from shrinking the estimate below what we count ourselves.

Without calibration data the factor is a default that depends on the counter:

- ``DEFAULT_HEURISTIC_FACTOR = 2.0`` for ``ceil(chars/4)`` (README "Token estimation and calibration").
Against what providers bill, chars/4
  was observed to undercount structured content (JSON, code, tool schemas) 2-3x; the design this follows
  first used 1.5 and moved to 2.0, and its stress runs document that a real ratio above the default cannot
  be caught before the first usage figure arrives, so the default errs high.

- ``DEFAULT_EXACT_FACTOR = 1.25`` for tiktoken counts. The exact count covers the transcript's own text with
  o200k (or cl100k); what a provider bills on top was measured (``python bench/estimate.py`` prints these
  numbers for a 100 MB coding-agent transcript from bench/gen_openai.py: tool calls, code, JSON, logs, some
  non-English text) or, where it cannot be measured offline, argued:

  * Per-message framing: OpenAI's chat format costs 3 tokens per message plus 3 to prime the reply, and
    Anthropic's is of the same order. The bench transcript averages ~1,080 o200k tokens a message, so framing
    is 0.28 % there; on samples/openai-session.jsonl and openai-long.jsonl (18 and 79 messages, ~130 and
    ~270 tokens a message) it is 2.5 % and 1.1 %; for chatty transcripts of ~40-token turns it is ~8 %.
  * The tokenizer: on the bench text cl100k and o200k agree within 0.1 % (code, JSON and English tokenize
    alike in both), so for OpenAI models the encoding choice hardly matters. Claude's tokenizer is not public
    and cannot be measured offline; Anthropic's count_tokens is commonly reported 10-30 % above o200k on
    English and code, and Anthropic documents its newest tokenizer as using up to ~35 % more tokens for the
    same text. That gap is what the default has to cover.
  * What the file does not hold: tool definitions (JSON schemas, often 1-10k tokens) and the provider's own
    system framing are billed but not in the transcript.

  1.25 covers the usual Claude tokenizer gap plus framing; for OpenAI models counted with their own encoding
  it overcounts by ~20 %, which only makes compaction fire a little early on the first, uncalibrated run.
  For comparison, on the bench text o200k gives 1.20 tokens per ceil(chars/4) token (1.05 and 1.17 on the
  two OpenAI samples; cl100k within 0.5 % of o200k on both), so the heuristic's
  default (2.0 × chars/4 ≈ 1.67 × o200k) is the more conservative of the two, as it should be for the
  weaker counter. Both defaults are overridable (``--default-factor``), and the first real usage figure
  replaces them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

DEFAULT_HEURISTIC_FACTOR = 2.0
DEFAULT_EXACT_FACTOR = 1.25
MIN_FACTOR = 1.0
MAX_FACTOR = 5.0


@dataclass(frozen=True, slots=True)
class Calibrated:
    """The result of :func:`calibrate`.

    ``tokens`` is the figure to decide with; ``calibrated`` = ceil(base × factor); ``base`` the uncalibrated
    estimate it started from; ``factor`` the correction used; ``source`` where it came from (as given by the
    caller: ``--real-tokens``, ``transcript``, ``state``, ``default``…); ``real`` the provider's count, if
    any.
    """

    tokens: int
    calibrated: int
    base: int
    factor: float
    source: str
    real: int | None


def clamp_factor(real: int, estimate: int) -> float | None:
    """The correction one measured request gives: ``clamp(real / estimate, MIN_FACTOR, MAX_FACTOR)``; None
    against an empty estimate (no meaningful ratio). The clamp keeps one odd turn from distorting all later
    ones."""
    if estimate <= 0:
        return None
    return float(_clamped(Fraction(real, estimate)))


def _clamped(ratio: Fraction) -> Fraction:
    return min(max(ratio, Fraction(MIN_FACTOR)), Fraction(MAX_FACTOR))


def default_factor_for(exact: str) -> float:
    """The default factor for a counter: ``none`` (chars/4 heuristic) → 2.0, anything exact → 1.25."""
    return DEFAULT_HEURISTIC_FACTOR if exact == "none" else DEFAULT_EXACT_FACTOR


def default_factor(*, exact_counted: bool, override: float | None) -> float:
    """The factor when nothing was reported: ``--default-factor``, else the counter's documented default."""
    if override is not None:
        return override
    return DEFAULT_EXACT_FACTOR if exact_counted else DEFAULT_HEURISTIC_FACTOR


def fit_factor(measured: float, default: float) -> float:
    """The factor a compacted result's fit is judged with: the one measured on this very content (it still
    holds for its compacted form), never below the default. Only the *stored* calibration is reset after a
    compaction, so the next run cannot loop on a stale factor."""
    return max(default, measured)


def _exact(x: float) -> Fraction:
    # From the decimal spelling, so 1.15 means 115/100 and ceil(100 × 1.15) is 115, not 116.
    return Fraction(repr(float(x)))


def calibrate(
    current: int,
    *,
    real: int | None,
    last_estimate: int | None,
    default_factor: float,
    source: str,
) -> Calibrated:
    """Calibrate ``current`` (an estimate with the same counter as ``last_estimate``) per README "Token
    estimation and calibration".

    With ``real`` and a positive ``last_estimate``: factor = clamp(real / last_estimate, 1.0, 5.0). Otherwise
    the factor is ``default_factor``. calibrated = ceil(current × factor). ``tokens`` = max(real, calibrated)
    whenever ``real`` is known (a reported count is never undercut, even with no estimate to relate it to),
    else ``calibrated``. Negative inputs or a non-positive default factor raise ValueError (caller bug).
    """
    if current < 0:
        raise ValueError(f"current estimate must be >= 0, got {current}")
    if real is not None and real < 0:
        raise ValueError(f"real tokens must be >= 0, got {real}")
    if not (default_factor > 0 and math.isfinite(default_factor)):
        raise ValueError(f"default factor must be a positive number, got {default_factor}")
    if real is not None and last_estimate is not None and last_estimate > 0:
        factor = _clamped(Fraction(real, last_estimate))
    else:
        factor = _exact(default_factor)
    calibrated = math.ceil(current * factor)
    tokens = calibrated if real is None else max(real, calibrated)
    return Calibrated(
        tokens=tokens, calibrated=calibrated, base=current, factor=float(factor), source=source, real=real
    )


# ------------------------------------------------------------------------------------------ the sources


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """Prompt tokens a provider reported for a request recorded in the transcript: the request saw the
    records before ``position`` (an index into the counts of the context)."""

    position: int
    prompt_tokens: int
    line: int
    source: str


class StoredCalibration(Protocol):
    """What the state keeps of the last request (``state.Calibration``)."""

    real: int | None
    last_estimate: int | None
    estimator: str | None
    factor: float | None


def calibrate_request(
    base: Sequence[int],
    *,
    usage: UsagePoint | None,
    real_tokens: int | None,
    stored: StoredCalibration | None,
    estimator: str,
    default: float,
    default_source: str,
) -> Calibrated:
    """Calibrate a context counted ``base`` (tokens per record) from the first source that has data, in the
    documented order: ``--real-tokens``; usage recorded in the transcript (``usage``, the last point, against
    the prefix that request saw); the state (a measured pair, else the factor of an earlier request); the
    default. A stored measurement holds only for the estimator that made it."""
    current = sum(base)
    same_estimator = stored is not None and stored.estimator in (None, estimator)
    if real_tokens is not None:
        # the figure is for the last request sent: what we wrote last time, if the state knows it
        last = current
        if stored is not None and same_estimator and stored.last_estimate:
            last = stored.last_estimate
        return calibrate(current, real=real_tokens, last_estimate=last, default_factor=default,
                         source="--real-tokens")
    if usage is not None:
        prefix = sum(base[: usage.position])
        if prefix > 0:
            return calibrate(current, real=usage.prompt_tokens, last_estimate=prefix, default_factor=default,
                             source=f"transcript usage (line {usage.line}, {usage.source})")
    if stored is not None and same_estimator:
        if stored.real and stored.last_estimate:
            return calibrate(current, real=stored.real, last_estimate=stored.last_estimate,
                             default_factor=default, source="state")
        if stored.factor:
            # the provider has not reported since our last output: keep the factor it last measured
            return calibrate(current, real=None, last_estimate=None, default_factor=stored.factor,
                             source="state (factor of an earlier request)")
    return calibrate(current, real=None, last_estimate=None, default_factor=default, source=default_source)
