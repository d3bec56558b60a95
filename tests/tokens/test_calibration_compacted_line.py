"""A recorded usage billed before the latest compaction is not learned after it
(docs/concepts/calibration.md#calibration): the work in flight kept after a summary carries the bill of a
request sent with the uncompacted context."""

from __future__ import annotations

from ctxcompact.tokens.calibration import calibrate_request
from ctxcompact.tokens.measured import UsagePoint


def _cal(usage: list[UsagePoint], at_line: int) -> tuple[int, int]:
    c = calibrate_request([500, 300, 200, 1_000], usage=usage, real_tokens=None, stored=None,
                          estimator="tiktoken:o200k_base", default=1.25, default_source="default",
                          compacted_at_line=at_line)
    return c.tokens, c.points


def test_a_bill_at_or_before_the_compaction_line_is_skipped() -> None:
    old = UsagePoint(position=2, prompt_tokens=60_000, line=10, source="message.usage")  # before: uncompacted
    assert _cal([old], 0)[0] >= 60_000  # without the line it is a floor
    assert _cal([old], 10) == (2_500, 0)  # at the line: skipped, the default factor (2,000 × 1.25)
    assert _cal([old], 9)[0] >= 60_000  # after the line: a bill of the written context


def test_a_bill_after_the_compaction_is_learned() -> None:
    old = UsagePoint(position=1, prompt_tokens=60_000, line=10, source="message.usage")
    new = UsagePoint(position=3, prompt_tokens=1_500, line=14, source="message.usage")
    tokens, points = _cal([old, new], 12)
    assert points == 1 and tokens >= 1_500
