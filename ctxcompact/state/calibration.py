"""The calibration's updates in the state
(docs/concepts/calibration.md#calibration): what a run, a
``calibrate`` call and a compaction change in :class:`~.model.Calibration`. The rules themselves (the factor's
clamp, the fit) are :mod:`ctxcompact.tokens.calibration`'s."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import UsageError
from ..tokens.calibration import clamp_factor, fit_affine
from .model import MAX_POINTS, Calibration, State, utc_now


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} must be a whole number >= 0, got {value!r}")
    return value


def record_real_tokens(state: State, prompt_tokens: int) -> Calibration:
    """Store the prompt tokens the provider reported for the last request (``ctxcompact calibrate``).

    When the estimate of that request is known, the pair is a measured request: kept in ``points``, with the
    factor it measures (``clamp(real / last_estimate, 1, 5)``) and the affine model refitted."""
    real = _check_count("prompt tokens", prompt_tokens)
    cal = state.calibration
    cal.real = real
    if cal.last_estimate is not None:
        factor = clamp_factor(real, cal.last_estimate)
        if factor is not None:
            cal.factor = factor
            _add_points(cal, [(cal.last_estimate, real)])
    cal.updated_at = utc_now()
    return cal


def remember_measured(state: State, measured: Iterable[tuple[int, int]], estimator: str) -> Calibration:
    """Keep the requests a run measured (the transcript's usage, ``--real-tokens``) with the model fitted to
    them, so they still count once the records that carried them are compacted away."""
    cal = state.calibration
    _use_estimator(cal, estimator)
    _add_points(cal, measured)
    return cal


def _use_estimator(cal: Calibration, estimator: str) -> None:
    """A measurement only holds for the estimator that made it: another one forgets them all."""
    if estimator != cal.estimator:
        cal.factor, cal.points, cal.hidden, cal.slope = None, [], None, None
    cal.estimator = estimator


def _add_points(cal: Calibration, measured: Iterable[tuple[int, int]]) -> None:
    points = list(cal.points)
    for p in measured:
        if p not in points:
            points.append(p)
    cal.points = points[-MAX_POINTS:]
    model = fit_affine(cal.points, cal.slope or cal.factor or 1.0)
    if model is not None:
        cal.hidden, cal.slope = model.hidden, model.slope


def record_estimate(state: State, estimate: int, estimator: str) -> Calibration:
    """Store our estimate of the request about to be sent (the written output), made by ``estimator``
    (``"heuristic"`` or ``"tiktoken:<encoding>"``).

    ``real`` is cleared: it measured the previous request, and pairing it with this new estimate would give
    a wrong factor (too small once the transcript grew). What was measured (factor, points, the model) is
    kept as the best guess until the provider reports again, unless the estimator changed (a measurement
    only holds for the estimator that made it)."""
    value = _check_count("estimate", estimate)
    cal = state.calibration
    _use_estimator(cal, estimator)
    cal.real = None
    cal.last_estimate = value
    cal.updated_at = utc_now()
    return cal


def reset_calibration(state: State) -> Calibration:
    """After a compaction
    (docs/concepts/calibration.md#calibration): the last
    request's pair and factor are forgotten, so a factor measured on the large pre-compaction request cannot
    scale the small compacted one into a loop. The affine model and its points stay: the hidden part (system
    prompt and tools the log does not hold) is in every request, before and after a compaction, and the slope
    is a property of the tokenizer, not of the transcript's size. Without such a model nothing is kept."""
    old = state.calibration
    keep = old.slope is not None
    state.calibration = Calibration(updated_at=utc_now(), estimator=old.estimator if keep else None,
                                    hidden=old.hidden if keep else None, slope=old.slope if keep else None,
                                    points=list(old.points) if keep else [])
    return state.calibration
