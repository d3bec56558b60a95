"""Compaction strategies behind one interface (:mod:`.base`), found by name in this registry.

- ``threshold`` (default): over the threshold, summary + continuation; ``--prune`` masks first.
- ``mask``: over the threshold, old tool results replaced by placeholders.
- ``sliding-window``: ADK-style compaction events every θ invocations or over ρ × window.

Adding a strategy: a module exposing ``STRATEGY`` (an object with the :class:`.base.Strategy` interface),
one line in ``_MODULES``, and its options (``options.Options`` fields, ``cli/options.py`` flags). Modules load
on first use, so importing this registry is cheap.
"""

from __future__ import annotations

import importlib

from ..errors import UsageError
from ..model import Record
from ..state import State
from .base import Outcome, Strategy, StrategyInput, Written

# name -> module (in this package); the order is the order --help lists them
_MODULES: dict[str, str] = {
    "threshold": "threshold",
    "mask": "mask",
    "sliding-window": "sliding_window",
}
NAMES: tuple[str, ...] = tuple(_MODULES)

__all__ = ["NAMES", "Outcome", "Strategy", "StrategyInput", "Written", "get_strategy", "reapply_all"]


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name`` (UsageError for an unknown name)."""
    module = _MODULES.get(name)
    if module is None:
        raise UsageError(f"unknown strategy {name!r}; known: {', '.join(NAMES)}")
    strategy: Strategy = importlib.import_module(f"{__package__}.{module}").STRATEGY
    return strategy


def reapply_all(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """What every strategy left in the state, applied again (so a later run never re-expands what an earlier
    one reduced), whatever strategy this run uses."""
    layered = sorted((s for s in map(get_strategy, NAMES) if s.state_layer), key=lambda s: s.state_layer)
    for strategy in layered:
        records = strategy.reapply(records, state, fmt_name)
    return records
