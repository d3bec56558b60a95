"""Calibration: turn a local estimate into the provider's token space, never undercounting
(docs/concepts/calibration.md#calibration).

Every billed request is ``real ≈ hidden + slope × visible``: ``visible`` is what we count of the prefix that
request saw, ``hidden`` what it carried that the log does not hold (an agent's system prompt and tool
definitions: Claude Code and Codex do not write them, yet every usage they record includes them), ``slope``
how far our counter is off for the rest. A multiplicative factor alone cannot represent a fixed hidden part:
a 25k-token first request over a one-sentence log either undercounts everything after a compaction or, at the
5.0 clamp, still undercounts by 20k. :func:`fit_affine` learns both from the measured requests
(:func:`calibrate_request`); with too little to tell them apart the factor rule below remains::

    factor     = clamp(real / last_estimate, 1.0, 5.0)
    calibrated = ceil(current × factor)
    tokens     = max(real, calibrated)

``real`` is a floor: a transcript does not shrink between two requests. The clamp keeps one odd turn (huge
JSON) from distorting every later turn, and the floor at 1.0 keeps a low ``real`` (e.g. right after a
compaction) from shrinking the estimate below what we count ourselves.

Without calibration data the factor is a default that depends on the counter:

- ``DEFAULT_HEURISTIC_FACTOR = 2.0`` for ``ceil(chars/4)`` (docs/concepts/calibration.md#calibration).
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

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol

from ..options import MAX_TOKENS

if TYPE_CHECKING:
    from .measured import Affine, UsagePoint

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
    hidden: int = 0  # the part of every request the transcript does not hold (affine model)
    slope: float | None = None  # provider tokens per estimated token (affine model); None: the factor rule
    points: int = 0  # measured requests behind the model
    default: float = 1.0  # the default factor of the counter (for projections under the factor rule)
    measured: tuple[tuple[int, int], ...] = ()  # the measured requests (visible, real), oldest first
    # usage the transcript records that cannot be for the compacted context written (line, real): not learned
    ignored: tuple[tuple[int, int], ...] = ()

    @property
    def affine(self) -> bool:
        return self.slope is not None

    def cost(self, visible: int) -> int:
        """What ``visible`` more estimated tokens add to a request, in the provider's tokens: ``slope ×
        visible`` under the affine model, else ``visible ×`` the fit factor (:meth:`project` without the
        hidden part). How a summary's size is judged against its budget
        (docs/concepts/summary.md#the-budget)."""
        if self.slope is not None:
            return math.ceil(_exact(self.slope) * visible)
        return math.ceil(visible * _exact(fit_factor(self.factor, self.default)))

    def project(self, visible: int) -> int:
        """The provider's tokens for another context of ``visible`` estimated tokens sent in the same session
        (a compacted or masked form of this one): ``hidden + slope × visible`` under the affine model (the
        hidden part does not shrink with the transcript), else ``visible ×`` the factor, never below the
        default (see :func:`fit_factor`). No floor: the last reported figure was for another context."""
        if self.slope is not None:
            return math.ceil(self.hidden + _exact(self.slope) * visible)
        return math.ceil(visible * _exact(fit_factor(self.factor, self.default)))


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
    """Calibrate ``current`` (an estimate with the same counter as ``last_estimate``) per
    docs/concepts/calibration.md#calibration.

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
    return Calibrated(tokens=tokens, calibrated=calibrated, base=current, factor=float(factor), source=source,
                      real=real, points=1 if real is not None and last_estimate else 0,
                      default=default_factor)


# --------------------------------------------------------------------------------------- the affine model

#: how many of the latest measured requests the affine fit uses (older ones describe an older mix of content)
FIT_POINTS = 16
#: two requests whose estimated sizes differ by less than this (tokens) cannot tell a slope from noise
MIN_SPREAD_TOKENS = 256
#: measured requests whose estimated sizes all lie within this share of what was billed are one tool loop: the
#: transcript grew by a few thousand tokens while the bill also carried what the log holds only in part (a
#: model's thinking), so the slope read from them (2.6 on a real Claude Code log) says nothing of a context
#: of another size; :func:`not_for_written` is judged with it bounded by the counter's default
#: (:func:`_predict`)
SPREAD_SHARE = 0.1


def fit_affine(points: Sequence[tuple[int, int]], prior_slope: float) -> Affine | None:
    """``real ≈ hidden + slope × visible`` from measured requests ``(visible, real)``, oldest first; None when
    they cannot tell a hidden part from a factor.

    One request tells only when it measured more than :data:`MAX_FACTOR` times our estimate: no tokenizer
    differs that much, so the excess is a fixed part the transcript does not hold (an agent's system prompt
    and tool definitions: the first request of a Claude Code session is one typed sentence and costs
    tens of thousands of tokens). Then ``slope = prior_slope`` and the hidden part is the rest.

    The slope is the median of the slopes between every two of the latest :data:`FIT_POINTS` requests whose
    sizes differ by :data:`MIN_SPREAD_TOKENS` or more (Theil-Sen), clamped to [MIN_FACTOR, MAX_FACTOR] (never
    below what we count ourselves), else ``prior_slope``. A median, not least squares: a request that jumps
    for what the log does not show (a Codex turn's reasoning, a tool schema added) is a step of the hidden
    part, and one such step fitted as a slope overcounted every later request by up to 70 % on a real Codex
    rollout. The hidden part puts the line through the latest request (the figure that also floors the
    estimate); it is never negative. Replayed on the real logs: mean error 1.4 % against 3.5 % for the least
    squares fit (``python bench/calibration.py``)."""
    pts = [(v, r) for v, r in points if v >= 0 and r >= 0][-FIT_POINTS:]
    if not pts:
        return None
    if len(pts) == 1:
        v, r = pts[0]
        if r <= MAX_FACTOR * v:
            return None  # a ratio a tokenizer can explain: the factor rule
        from .measured import Affine  # here: a call with nothing measured makes no Affine (measured.py)

        return Affine(hidden=max(0, math.ceil(r - _exact(prior_slope) * v)), slope=prior_slope)
    slopes = [Fraction(r2 - r1, v2 - v1) for k, (v1, r1) in enumerate(pts) for v2, r2 in pts[k + 1:]
              if abs(v2 - v1) >= MIN_SPREAD_TOKENS]
    import statistics  # here: only a log with billed usage fits a line, and the module costs every call ~2 ms

    slope = _clamped(statistics.median(slopes)) if slopes else _exact(prior_slope)
    v, r = pts[-1]
    hidden = max(Fraction(0), r - slope * v)
    from .measured import Affine

    return Affine(hidden=math.ceil(hidden), slope=float(slope))


# ------------------------------------------------------------------------------------------ the sources


class StoredCalibration(Protocol):
    """What the state keeps of the requests measured so far (``state.Calibration``)."""

    real: int | None
    last_estimate: int | None
    estimator: str | None
    factor: float | None
    hidden: int | None
    slope: float | None
    points: list[tuple[int, int]]


def narrow(points: Sequence[tuple[int, int]]) -> bool:
    """Whether measured requests ``(visible, real)`` all lie within :data:`SPREAD_SHARE` of what was billed
    (one tool loop: no slope can be told from them)."""
    pts = [(v, r) for v, r in points if v >= 0 and r >= 0][-FIT_POINTS:]
    if len(pts) < 2:
        return False
    sizes = [v for v, _ in pts]
    return max(sizes) - min(sizes) < SPREAD_SHARE * max(r for _, r in pts)


def _predict(stored: StoredCalibration | None, same: bool, default: float, visible: int) -> int:
    """What a request of ``visible`` estimated tokens costs by what was measured before it (the state's
    model, else its factor, else the default). A slope read from one tool loop (:func:`narrow`) is bounded by
    the default: judged with 2.6, a bill of the uncompacted session passed for one of the written context."""
    if stored is not None and same and stored.slope is not None and stored.hidden is not None:
        slope = _exact(stored.slope)
        if narrow(stored.points):
            # the hidden part goes through the latest point, as the fit put it, at the bounded slope
            v, r = [(int(a), int(b)) for a, b in stored.points][-1]
            slope = min(slope, _exact(default))
            return math.ceil(max(Fraction(0), r - slope * v) + slope * visible)
        return math.ceil(stored.hidden + slope * visible)
    factor = stored.factor if stored is not None and same and stored.factor else default
    return math.ceil(_exact(factor) * visible)


def not_for_written(real: int, predicted: int, compacted_away: int) -> bool:
    """A bill that cannot be for the compacted context ctxcompact wrote (docs/concepts/calibration.md
    #usage-that-is-not-for-the-written-context).

    After compactions removed ``compacted_away`` provider tokens, a request that extends what was written
    costs about ``predicted``, one that extends the uncompacted context about ``predicted +
    compacted_away``. A bill nearer the second is the agent still sending the uncompacted context (or a
    replay feeding the original session's bills back); learning it would read the removed part as a hidden
    prompt. Only when the compactions removed :data:`MIN_SPREAD_TOKENS` or more: less cannot be told from
    noise."""
    return compacted_away >= MIN_SPREAD_TOKENS and real > predicted + compacted_away / 2


def _prefix_sums(base: Sequence[int]) -> list[int]:
    sums = [0]
    for n in base:
        sums.append(sums[-1] + n)
    return sums


def calibrate_request(
    base: Sequence[int],
    *,
    usage: Sequence[UsagePoint],
    real_tokens: int | None,
    stored: StoredCalibration | None,
    estimator: str,
    default: float,
    default_source: str,
    compacted_away: int = 0,
    compacted_at_line: int = 0,
) -> Calibrated:
    """Calibrate a context counted ``base`` (tokens per record) from what was measured
    (docs/concepts/calibration.md#calibration).

    ``compacted_away``: the provider tokens earlier compactions removed from the context this one extends (0
    without one); a recorded usage that :func:`not_for_written` says belongs to the uncompacted context, and
    every later one at least as large, is not measured and no floor, and is returned in ``ignored``.
    ``compacted_at_line``: the input's last line when the latest compaction was made; a usage recorded up to
    there (on the work in flight kept after the summary) was billed before that compaction, for a context it
    no longer measures: not measured, no floor (the run that compacted kept it against its true prefix).

    Measured requests ``(visible, real)``: those the state kept (same estimator), every usage the transcript
    records (``usage``, each against the prefix that request saw), and ``--real-tokens`` (against what we
    wrote last time). With two or more, the affine model (:func:`fit_affine`); with one, the factor
    ``clamp(real / visible)``; with none, the state's model of earlier requests, else the default factor.
    Never below the last reported figure of a request whose context this one extends."""
    current = sum(base)
    same = stored is not None and stored.estimator in (None, estimator)
    sums = _prefix_sums(base) if usage else []  # (only a usage point is placed by it: a list per record)
    kept = [(int(v), int(r)) for v, r in stored.points] if stored is not None and same else []
    if stored is not None and same and stored.real and stored.last_estimate:
        pair = (stored.last_estimate, stored.real)  # the last request, reported since we wrote it
        if pair not in kept:
            kept.append(pair)
    measured: list[tuple[int, int]] = list(kept)
    floor: int | None = None
    last_source = ""
    ignored: list[tuple[int, int]] = []
    least_ignored: int | None = None  # the smallest bill found to be for the uncompacted context
    accepted: list[UsagePoint] = []
    away = compacted_away
    if stored is not None and same and stored.slope and stored.slope > default and narrow(stored.points):
        # the compactions' sizes were counted at a slope of one tool loop: what they removed, at the bounded
        # one (as the prediction is, _predict)
        away = math.floor(compacted_away * _exact(default) / _exact(stored.slope))
    for u in usage:
        if u.line <= compacted_at_line:
            continue  # billed before the latest compaction (docs/concepts/calibration.md#calibration)
        visible = sums[min(u.position, len(base))]
        if compacted_away and (
                not_for_written(u.prompt_tokens, _predict(stored, same, default, visible), away)
                # a context never shrinks by itself: a bill as large as one already found to be for the
                # uncompacted context is for the uncompacted context too
                or (least_ignored is not None and u.prompt_tokens >= least_ignored)):
            ignored.append((u.line, u.prompt_tokens))
            least_ignored = u.prompt_tokens if least_ignored is None else min(least_ignored, u.prompt_tokens)
            continue
        accepted.append(u)
        if visible > 0 and u.prompt_tokens <= MAX_TOKENS:  # a larger figure is no measurement: ignored
            if (visible, u.prompt_tokens) not in kept:  # a point of this transcript kept by an earlier run
                measured.append((visible, u.prompt_tokens))
            floor, last_source = u.prompt_tokens, f"transcript usage (line {u.line}, {u.source})"
    if real_tokens is not None:
        last = stored.last_estimate if stored is not None and same and stored.last_estimate else current
        measured.append((last, real_tokens))
        floor, last_source = real_tokens, "--real-tokens"
    elif floor is None and stored is not None and same and stored.real and stored.last_estimate:
        floor = stored.real  # reported for what we wrote last time, which this context extends
        last_source = "state"
    prior = stored.slope if stored is not None and same and stored.slope else default
    model = fit_affine(measured, prior)
    result = _calibrated(current, model, measured, kept, accepted, real_tokens, floor, last_source, stored,
                         same, default, default_source)
    return dataclasses.replace(result, ignored=tuple(ignored)) if ignored else result


def _calibrated(current: int, model: Affine | None, measured: list[tuple[int, int]],
                kept: list[tuple[int, int]], usage: Sequence[UsagePoint], real_tokens: int | None,
                floor: int | None, last_source: str, stored: StoredCalibration | None, same: bool,
                default: float, default_source: str) -> Calibrated:
    if model is not None:
        new = len(measured) - len(kept)
        where = (f"transcript usage up to line {usage[-1].line}" if usage else
                 "--real-tokens" if real_tokens is not None else "state")
        if kept and new:
            where = f"{where} and the state"
        what = (f"affine fit of {len(measured)} measured requests" if len(measured) > 1 else
                "one measured request far above any tokenizer ratio: the rest is a hidden part")
        return _affine(current, model, floor, measured, default, f"{what} ({where})")
    if len(measured) == 1:
        (visible, real), = measured
        factor = _clamped(Fraction(real, visible)) if visible > 0 else _exact(default)
        # a point the state kept is no floor: it measured a request whose context may have been compacted
        return _factor(current, factor, floor, measured, default, last_source or "state (an earlier request)")
    if stored is not None and same:
        if stored.slope is not None and stored.hidden is not None:
            from .measured import Affine

            return _affine(current, Affine(stored.hidden, stored.slope), None, [], default,
                           "state (hidden part and slope of earlier requests)")
        if stored.factor:
            # the provider has not reported since our last output: keep the factor it last measured
            return _factor(current, _exact(stored.factor), None, [], default,
                           "state (factor of an earlier request)")
    return _factor(current, _exact(default), None, [], default, default_source)


def _factor(current: int, factor: Fraction, floor: int | None, measured: Sequence[tuple[int, int]],
            default: float, source: str) -> Calibrated:
    calibrated = math.ceil(current * factor)
    tokens = calibrated if floor is None else max(floor, calibrated)
    return Calibrated(tokens=tokens, calibrated=calibrated, base=current, factor=float(factor), source=source,
                      real=floor, points=len(measured), default=default, measured=tuple(measured))


def _affine(current: int, model: Affine, floor: int | None, measured: Sequence[tuple[int, int]],
            default: float, source: str) -> Calibrated:
    calibrated = math.ceil(model.hidden + _exact(model.slope) * current)
    tokens = calibrated if floor is None else max(floor, calibrated)
    return Calibrated(tokens=tokens, calibrated=calibrated, base=current, factor=model.slope, source=source,
                      real=floor, hidden=model.hidden, slope=model.slope, points=len(measured),
                      default=default, measured=tuple(measured))
