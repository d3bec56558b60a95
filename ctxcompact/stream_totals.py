"""What the streamed route's pass 1 knows of the records counted so far (``streaming``): their counts as
arrays (2 bytes a record, 4 or 8 where a record needs them: ``columns``), the usage the log records, the
system prompt's tokens, the latest window, the report's statistics; counted in batches, kept for a resume
point and read back from one."""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import columns as cols
from .budget import Budget
from .model import Record
from .options import Options
from .pipeline import budget_from_window, recorded_window, usage_points
from .report import ContextStats, context_stats
from .tokens.cache import CountCache
from .tokens.counts import Counts, count_records, encoding_name, system_tokens

if TYPE_CHECKING:
    from .tokens.measured import UsagePoint


class Totals:
    """What the report needs of the parts counted so far."""

    def __init__(self, fmt: str, opts: Options, budget: Budget, cache: CountCache | None) -> None:
        self.opts, self.cache, self.base_budget = opts, cache, budget
        # 2 bytes a record (a list holds a slot and, over 256, an int object per record; ``columns``:
        # wider once a record's count needs them)
        self.heuristic = cols.narrow()
        self.exact: array[int] | None = None if opts.exact == "none" else cols.narrow()
        self.usage: list[UsagePoint] = []
        self.system = 0
        self.window: tuple[int, int] | None = None  # the latest window the log records, and its line
        self.stats = ContextStats(format=fmt, records=0, covered=0)
        self.pending: list[Record] = []
        self.pending_bytes = 0
        self.at_mark: int | None = None  # the records before a resume point (:meth:`mark`)
        #: how many they are and what else was counted of them (:meth:`kept`)
        self.marked: tuple[int, dict[str, Any]] | None = None

    #: settled records are counted in batches of about this many bytes or records (a tiktoken call per batch,
    #: not per part; a batch's records are held while counting, so tiny lines are bounded by number too)
    BATCH_BYTES = 1000000
    BATCH_RECORDS = 4096

    @property
    def budget(self) -> Budget:
        return budget_from_window(self.base_budget, self.opts, self.window)  # the latest window wins, as held

    def add(self, part: list[Record]) -> None:
        self.pending.extend(part)
        self.pending_bytes += sum(len(r.raw) if r.raw is not None else 0 for r in part)
        if self.pending_bytes >= self.BATCH_BYTES or len(self.pending) >= self.BATCH_RECORDS:
            self.flush()

    def mark(self) -> None:
        """Keep what the records added so far count (:attr:`marked`), once they are counted: a later read
        starts after them. (Counted with what follows, in the same batch: as many counts as without.)"""
        self.at_mark = len(self.heuristic) + len(self.pending)

    def flush(self) -> None:
        part, self.pending, self.pending_bytes = self.pending, [], 0
        if not part:
            return
        counts = count_records(part, self.opts, self.cache)
        cut = self.at_mark - len(self.heuristic) if self.at_mark is not None else -1
        if 0 <= cut <= len(part):
            exact = counts.exact
            self._fold(part[:cut], counts.heuristic[:cut], None if exact is None else exact[:cut])
            self.marked, self.at_mark = (len(self.heuristic), self._sums()), None
            self._fold(part[cut:], counts.heuristic[cut:], None if exact is None else exact[cut:])
        else:
            self._fold(part, counts.heuristic, counts.exact)

    def _fold(self, part: list[Record], heuristic: Sequence[int], exact: Sequence[int] | None) -> None:
        at = len(self.heuristic)
        self.usage.extend(dataclasses.replace(p, position=p.position + at) for p in usage_points(part))
        self.heuristic = cols.extend(self.heuristic, heuristic)
        if self.exact is not None and exact is not None:
            self.exact = cols.extend(self.exact, exact)
        self.system += system_tokens(exact if exact is not None else heuristic, part)
        self.window = recorded_window(part) or self.window
        s = context_stats(part, self.stats.format, 0, 0, 0)
        for role, n in s.messages.items():
            self.stats.messages[role] = self.stats.messages.get(role, 0) + n
        self.stats.tool_calls += s.tool_calls
        self.stats.chars += s.chars
        self.stats.from_input += s.from_input

    def kept(self) -> tuple[dict[str, Any], list[memoryview]] | None:
        """What was counted of the records before the resume point (:meth:`mark`), for a later read to start
        from (:meth:`take`), once every part is counted (the columns then grow no more): the sums, and
        their counts as views of the columns, not copies (2, 4 or 8 bytes a record each, as ``widths`` says:
        the heuristic's, then the exact counter's; kept by the count cache as columns,
        ``CountCache.resume_columns``)."""
        if self.marked is None:
            return None
        n, sums = self.marked
        columns = [self.heuristic] if self.exact is None else [self.heuristic, self.exact]
        return ({"exact": self.exact is not None, "widths": [c.itemsize for c in columns], **sums},
                [_view(c, n) for c in columns])

    def _sums(self) -> dict[str, Any]:
        return {"usage": [(p.position, p.prompt_tokens, p.line, p.source) for p in self.usage],
                "system": self.system, "window": self.window, "messages": dict(self.stats.messages),
                "tool_calls": self.stats.tool_calls, "chars": self.stats.chars,
                "from_input": self.stats.from_input}

    @staticmethod
    def read(kept: dict[str, Any], columns: Sequence[Any], exact: bool) -> dict[str, Any]:
        """What :meth:`kept` gave, checked and typed (raises TypeError, ValueError or KeyError on anything
        else), for :meth:`take`."""
        widths = kept["widths"]
        if kept["exact"] is not exact or len(columns) != 1 + exact or len(widths) != len(columns):
            raise ValueError("counted with another estimator")
        heuristic = cols.from_bytes(columns[0], widths[0])
        counts = cols.from_bytes(columns[1], widths[1]) if exact else None
        if counts is not None and len(counts) != len(heuristic):
            raise ValueError("counts of unequal lengths")
        window = kept["window"]
        usage = kept["usage"]
        if usage:  # (only a log with usage measures: tokens/measured.py)
            from .tokens.measured import UsagePoint

            usage = [UsagePoint(int(a), int(b), int(c), str(d)) for a, b, c, d in usage]
        return {"heuristic": heuristic, "exact": counts,
                "usage": list(usage),
                "system": int(kept["system"]),
                "window": None if window is None else (int(window[0]), int(window[1])),
                "messages": {str(k): int(v) for k, v in kept["messages"].items()},
                "tool_calls": int(kept["tool_calls"]), "chars": int(kept["chars"]),
                "from_input": int(kept["from_input"])}

    def held(self) -> dict[str, Any]:
        """What was counted so far, every part flushed, as :meth:`read` gives a resume point's: for a later
        call on the same records grown to :meth:`take` (the held route's ``context.Reread``). Copies: the
        columns go on growing here."""
        assert not self.pending
        return {"heuristic": self.heuristic[:], "exact": None if self.exact is None else self.exact[:],
                "usage": list(self.usage), "system": self.system, "window": self.window,
                "messages": dict(self.stats.messages), "tool_calls": self.stats.tool_calls,
                "chars": self.stats.chars, "from_input": self.stats.from_input}

    def counts(self) -> Counts:
        """The counts of every part (flushed), with the encoding that made the exact ones."""
        encoding = encoding_name(self.opts) if self.exact is not None else None
        return Counts(self.heuristic, self.exact, encoding)

    def take(self, read: dict[str, Any]) -> None:
        """Start from the parts counted before a resume point (:meth:`read`)."""
        self.heuristic = read["heuristic"][:]  # (copies: the counts read are the resume point's)
        self.exact = None if read["exact"] is None else read["exact"][:]
        self.usage, self.system, self.window = list(read["usage"]), read["system"], read["window"]
        self.stats.messages = dict(read["messages"])
        self.stats.tool_calls, self.stats.chars = read["tool_calls"], read["chars"]
        self.stats.from_input = read["from_input"]


def _view(column: array[int], n: int) -> memoryview:
    """The first ``n`` items of ``column`` as bytes, not copied (the column must not grow meanwhile)."""
    return memoryview(column).cast("B")[:n * column.itemsize]

