"""Compaction strategies behind one interface (:mod:`.base`), found by name in this registry.

- ``threshold`` (default): over the threshold, summary + continuation; ``--prune`` masks first.
- ``mask``: over the threshold, old tool results replaced by placeholders.
- ``sliding-window``: ADK-style compaction events every θ invocations or over ρ × window.

Adding a strategy: a module exposing ``STRATEGY`` (an object with the :class:`.base.Strategy` interface,
its own state section if it keeps one) and its entry in :data:`ctxcompact.plugins.STRATEGIES` (with its
options, declared once: the CLI's flags are made from them); a library user can also :func:`register` one
at run time (docs/DESIGN.md has a worked example). Modules load on first use, so importing this registry is
cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..plugins import ESTIMATE_STREAMS, MASKS_STREAMED, RUN_GATHERS, STRATEGIES

if TYPE_CHECKING:  # the interface is in .base; importing it here would load the engine's layers for --help
    from ..model import Record
    from ..options import Options
    from ..state import State
    from .base import Strategy

NAMES: tuple[str, ...] = STRATEGIES.builtin_names()

__all__ = ["NAMES", "Layers", "estimate_needs_context", "get_strategy", "has_trait", "masks_streamed",
           "names",
           "reapplies_each", "reapply_all", "reapply_each", "register", "run_gathers"]


def register(strategy: Strategy) -> None:
    """Make ``strategy`` available by its name to the library (``Options(strategy=name)``). Its own options
    (``strategy.options``, :class:`plugins.Option`) reach it as ``opts.option(name)``; its own part of the
    state (``strategy.state_section``) is kept under its key (ValueError when either is taken)."""
    from ..options import Options

    taken = [o.name for o in getattr(strategy, "options", ()) if o.name in Options.__dataclass_fields__]
    if taken:
        raise ValueError(f"{strategy.name!r} declares options ctxcompact already has: {', '.join(taken)}")
    STRATEGIES.register(strategy.name, strategy, getattr(strategy, "traits", ()))


def names() -> tuple[str, ...]:
    """Every strategy name: the built-in ones, then those registered at run time."""
    return STRATEGIES.names()


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name`` (UsageError for an unknown name)."""
    return STRATEGIES.get(name)


def estimate_needs_context(name: str, opts: Options) -> bool:
    """Whether strategy ``name``'s ``describe`` needs the whole context (else ``estimate`` and ``run`` may
    stream; UsageError for an unknown name): unless it declares the trait ``plugins.ESTIMATE_STREAMS``, or
    one of its own flags is on (threshold's ``--prune`` masks, and masking's figures need the context).
    Answered without loading it: a hook's call below the threshold never loads its strategy."""
    STRATEGIES.check(name)
    return not has_trait(name, ESTIMATE_STREAMS, opts)


def has_trait(name: str, trait: str, opts: Options) -> bool:
    """Whether strategy ``name`` declares ``trait`` (``plugins``: its registry entry, or its ``traits`` when
    registered at run time; answered without loading it) and none of its own flags is on: a flag asks for
    more than the trait covers (threshold's ``--prune`` masks first)."""
    return STRATEGIES.has(name, trait) and not any(
        opts.option(o.name) for o in STRATEGIES.options_of(name) if o.kind == "flag")


def run_gathers(name: str) -> bool:
    """Whether ``run`` of strategy ``name`` streams pass 1 with the strategy's own gatherer (the trait
    ``plugins.RUN_GATHERS``, with its ``gathering`` and ``quiet``; answered without loading it)."""
    return STRATEGIES.has(name, RUN_GATHERS)


def masks_streamed(name: str, opts: Options) -> bool:
    """Whether ``run`` of strategy ``name`` with ``opts`` masks first (the trait ``plugins.MASKS_STREAMED``,
    where its ``describe`` needs the context: the mask strategy, threshold's ``--prune``), so it streams
    with mask's quiet keys below the threshold and masks in pass 2 over it (answered without loading it)."""
    return STRATEGIES.has(name, MASKS_STREAMED) and estimate_needs_context(name, opts)


def reapply_all(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """What every strategy left in the state, applied again (so a later run never re-expands what an earlier
    one reduced), whatever strategy this run uses. A built-in is loaded only when the state holds its
    section, not empty (its registry entry names the key): without one, its ``reapply`` changes nothing."""
    for strategy in _layered(state):
        records = strategy.reapply(records, state, fmt_name)
    return records


def _layered(state: State) -> list[Strategy]:
    """The strategies :func:`reapply_all` applies again, in order."""
    def may_reapply(name: str) -> bool:
        own = STRATEGIES.state_key_of(name)
        return not STRATEGIES.is_builtin(name) or (own is not None and state.holds(own))

    return sorted((s for s in map(get_strategy, filter(may_reapply, names())) if s.state_layer),
                  key=lambda s: s.state_layer)


def reapplies_each(state: State) -> bool:
    """Whether :func:`reapply_each` can apply the state again a record at a time: every strategy it applies
    has a ``reapply_each`` (masking's gives each record its own way; sliding-window events' place each
    summary before the first record past where its range begins and hold only the events not placed yet)."""
    return all(hasattr(s, "reapply_each") for s in _layered(state))


class Layers:
    """:func:`reapply_all` for a reading that does not hold the records: each record read gives what
    ``reapply_all`` gives in its place (none, it, or several), and :meth:`end` what it gives after the last
    one; each layer by its strategy's own ``reapply_each`` (the code of its ``reapply``), in layer order."""

    def __init__(self, each: list[Callable[[Record], Any]]) -> None:
        self.each = each

    def __call__(self, rec: Record) -> list[Record]:
        return self._through(0, [rec])

    def passes_on(self, index: int) -> bool:
        """Whether every record from input index ``index`` on is given in its place alone (a later read may
        start there): a layer that gives several records for one says (``passes_on``)."""
        return all(f.passes_on(index) for f in self.each if hasattr(f, "passes_on"))

    def skip_to(self, index: int) -> bool:
        """Start at input index ``index``, where an earlier read :meth:`passes_on`; False if one cannot."""
        return all(f.skip_to(index) for f in self.each if hasattr(f, "skip_to"))

    def end(self) -> list[Record]:
        out: list[Record] = []
        for k, f in enumerate(self.each):  # a layer's end goes through the layers after it
            ending = getattr(f, "end", None)
            if ending is not None:
                out.extend(self._through(k + 1, ending()))
        return out

    def _through(self, k: int, records: list[Record]) -> list[Record]:
        for f in self.each[k:]:
            given: list[Record] = []
            for rec in records:
                got = f(rec)
                if isinstance(got, list):
                    given.extend(got)
                elif got is not None:
                    given.append(got)
            records = given
        return records


def reapply_each(state: State, fmt_name: str) -> Layers | None:
    """:func:`reapply_all` a record at a time (:class:`Layers`), for a reading that does not hold the
    records (``streaming``); None when there is nothing to apply again. Only where :func:`reapplies_each`."""
    each = [s.reapply_each(state, fmt_name) for s in _layered(state)]  # type: ignore[attr-defined]
    return Layers(each) if each else None
