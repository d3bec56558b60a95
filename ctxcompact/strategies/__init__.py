"""Compaction strategies behind one interface (:mod:`.base`), found by name in this registry.

- ``threshold`` (default): over the threshold, summary + continuation; ``--prune`` masks first.
- ``mask``: over the threshold, old tool results replaced by placeholders.
- ``sliding-window``: ADK-style compaction events every θ invocations or over ρ × window.

Adding a strategy: a module exposing ``STRATEGY`` (an object with the :class:`.base.Strategy` interface),
one line in ``_MODULES``, and its options (``options.Options`` fields, ``cli/options.py`` flags); a library
user can also :func:`register` one at run time (docs/DESIGN.md has a worked example). Modules load on first
use, so importing this registry is cheap (the CLI's ``--strategy`` choices come from it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:  # the interface is in .base; importing it here would load the engine's layers for --help
    from ..model import Record
    from ..state import State
    from .base import Strategy

# name -> module (in this package); the order is the order --help lists them
_MODULES: dict[str, str] = {
    "threshold": "threshold",
    "mask": "mask",
    "sliding-window": "sliding_window",
}
NAMES: tuple[str, ...] = tuple(_MODULES)

_REGISTERED: dict[str, Strategy] = {}

__all__ = ["NAMES", "get_strategy", "names", "reapply_all", "register"]


def register(strategy: Strategy) -> None:
    """Make ``strategy`` available by its name to the library (``Options(strategy=name)``)."""
    if strategy.name in _MODULES:
        raise ValueError(f"{strategy.name!r} is a built-in strategy")
    _REGISTERED[strategy.name] = strategy


def names() -> tuple[str, ...]:
    """Every strategy name: the built-in ones, then those registered at run time."""
    return NAMES + tuple(_REGISTERED)


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name`` (UsageError for an unknown name)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    module = _MODULES.get(name)
    if module is None:
        raise UsageError(f"unknown strategy {name!r}; known: {', '.join(names())}")
    strategy: Strategy = importlib.import_module(f"{__package__}.{module}").STRATEGY
    return strategy


def reapply_all(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """What every strategy left in the state, applied again (so a later run never re-expands what an earlier
    one reduced), whatever strategy this run uses."""
    layered = sorted((s for s in map(get_strategy, names()) if s.state_layer), key=lambda s: s.state_layer)
    for strategy in layered:
        records = strategy.reapply(records, state, fmt_name)
    return records
