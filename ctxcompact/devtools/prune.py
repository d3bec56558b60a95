"""``ctxcompact simulate --prune``: every scenario of the stress matrix played twice through the public API,
summary-only (the default) and with ``--prune`` (masking first), to show what the mask tier saves the
summarizer and what it costs in tokens sent (docs/guides/strategies.md#mask-and-prune-the-masking-rules)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api
from ..state import Compaction
from .scenarios import SCENARIOS, Scenario
from .simulate import Corpus, ScenarioResult, Session


@dataclass(slots=True)
class PruneComparison:
    """One scenario played twice through the real pipeline: summary-only (the default) and ``--prune``."""

    name: str
    window: int
    summaries_plain: int  # compactions of the default run (all summaries)
    summaries_prune: int  # summaries the --prune run still needed
    masks_prune: int  # compactions the mask tier did alone
    summarized_tokens_plain: int  # tokens handed to the summarizer (sum of tokens_before of each summary)
    summarized_tokens_prune: int
    sent_tokens_plain: int  # real tokens of every request sent to the model
    sent_tokens_prune: int
    failures_plain: list[str]
    failures_prune: list[str]

    @property
    def compactions_avoided(self) -> int:
        return self.summaries_plain - self.summaries_prune

    @property
    def summarized_tokens_saved(self) -> int:
        return self.summarized_tokens_plain - self.summarized_tokens_prune

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "window": self.window, "summaries_plain": self.summaries_plain,
                "summaries_prune": self.summaries_prune, "masks_prune": self.masks_prune,
                "compactions_avoided": self.compactions_avoided,
                "summarized_tokens_plain": self.summarized_tokens_plain,
                "summarized_tokens_prune": self.summarized_tokens_prune,
                "summarized_tokens_saved": self.summarized_tokens_saved,
                "sent_tokens_plain": self.sent_tokens_plain, "sent_tokens_prune": self.sent_tokens_prune,
                "failures_plain": self.failures_plain, "failures_prune": self.failures_prune}


def _play(scenario: Scenario, seed: int, corpus: Corpus,
          prune: bool) -> tuple[ScenarioResult, list[Compaction]]:
    with tempfile.TemporaryDirectory(prefix="ctxcompact-prune-") as tmp:
        session = Session(scenario, seed, Path(tmp), corpus)
        session.opts.prune = prune
        result = session.play()
        state = api.load_state(session.state_path)
        return result, list(state.compactions) if state is not None else []


def simulate_with_pruning(scenarios: Iterable[Scenario] | None = None,
                          seed: int = 0) -> list[PruneComparison]:
    """Play every scenario of the matrix (or the given ones) with and without ``--prune`` and compare what
    the summarizer had to do and what was sent. Uses ``simulate.Session`` as it is; only ``opts.prune``
    differs between the two plays, and both see the same generated content (same seed, same corpus)."""
    out: list[PruneComparison] = []
    for scenario in SCENARIOS if scenarios is None else scenarios:
        plain, plain_hist = _play(scenario, seed, Corpus(seed), prune=False)
        pruned, prune_hist = _play(scenario, seed, Corpus(seed), prune=True)
        summaries_p = [c for c in plain_hist if c.tier != "mask"]
        summaries_q = [c for c in prune_hist if c.tier != "mask"]
        out.append(PruneComparison(
            name=scenario.name, window=scenario.window,
            summaries_plain=len(summaries_p), summaries_prune=len(summaries_q),
            masks_prune=sum(1 for c in prune_hist if c.tier == "mask"),
            summarized_tokens_plain=sum(c.tokens_before for c in summaries_p),
            summarized_tokens_prune=sum(c.tokens_before for c in summaries_q),
            sent_tokens_plain=sum(t.real for t in plain.trace if t.sent),
            sent_tokens_prune=sum(t.real for t in pruned.trace if t.sent),
            failures_plain=plain.failures, failures_prune=pruned.failures))
    return out


def render_prune_table(rows: list[PruneComparison]) -> str:
    """The summary-only vs --prune comparison as a table, with totals (``ctxcompact simulate --prune``)."""
    head = (f"{'scenario':<45} {'summaries':>11} {'masks':>5} {'to summarizer':>23} {'sent to model':>25}  "
            "failures")
    lines = [head, "-" * len(head)]
    for r in rows:
        fails = "; ".join(r.failures_plain + r.failures_prune) or "-"
        lines.append(f"{r.name:<45} {r.summaries_plain:>4} → {r.summaries_prune:<4} {r.masks_prune:>5} "
                     f"{r.summarized_tokens_plain:>10,} → {r.summarized_tokens_prune:<10,} "
                     f"{r.sent_tokens_plain:>11,} → {r.sent_tokens_prune:<11,}  {fails}")
    plain = sum(r.summaries_plain for r in rows)
    pruned = sum(r.summaries_prune for r in rows)
    summarized = (sum(r.summarized_tokens_plain for r in rows), sum(r.summarized_tokens_prune for r in rows))
    sent = (sum(r.sent_tokens_plain for r in rows), sum(r.sent_tokens_prune for r in rows))
    lines.append("")
    masks = sum(r.masks_prune for r in rows)
    lines.append(f"{len(rows)} scenarios: summaries {plain:,} → {pruned:,} ({plain - pruned:,} compactions "
                 f"avoided, {masks:,} done by the mask tier); tokens to the summarizer "
                 f"{summarized[0]:,} → {summarized[1]:,}; tokens sent to the model {sent[0]:,} → {sent[1]:,}")
    return "\n".join(lines)
