"""How well the calibration predicts a log's own bills (``eval``'s calibration section, bench/calibration.py):
every request the log recorded, estimated the way ``run`` would have estimated it before it was sent."""

from __future__ import annotations

from dataclasses import dataclass

from ..context import build_context
from ..options import Options
from ..pipeline import usage_points
from ..source import InputData, Source
from ..tokens.calibration import calibrate_request, default_factor
from ..tokens.counts import count_records


@dataclass(frozen=True, slots=True)
class ReplayPoint:
    """One request the log recorded: what ``run`` would have estimated before it was sent, and the bill."""

    line: int
    visible: int  # estimated tokens of the context the request saw
    predicted: int  # calibrated, from the requests before it only
    real: int  # what the provider billed

    @property
    def error(self) -> float:
        """(predicted − real) / real: negative is an undercount."""
        return (self.predicted - self.real) / self.real if self.real else 0.0


def replay_calibration(source: Source, opts: Options | None = None) -> list[ReplayPoint]:
    """Every provider usage the log records, estimated exactly as ``run`` would have estimated that request
    from what was known before it (the earlier usage only, no state), against what the provider billed:
    how a user checks "never undercount" on their own logs."""
    opts = opts or Options()
    ctx = build_context(InputData.load(source), opts, None, schema=False)
    counts = count_records(ctx.transcript.records, opts)
    points = usage_points(ctx.transcript.records)
    default = default_factor(exact_counted=counts.exact_counted, override=opts.default_factor)
    out = []
    for k, u in enumerate(points):
        base = counts.base[: u.position]
        cal = calibrate_request(base, usage=points[:k], real_tokens=None, stored=None,
                                estimator=counts.estimator, default=default, default_source="")
        out.append(ReplayPoint(line=u.line, visible=sum(base), predicted=cal.tokens, real=u.prompt_tokens))
    return out
