"""The text of `ctxcompact eval`: one table row per file and strategy, a mean row, and the replay's chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COLUMNS = (
    "file",
    "strategy",
    "tokens",
    "fits",
    "valid",
    "latest",
    "rules",
    "todos",
    "error",
    "ids",
    "base ids",
    "probes",
    "tail",
    "head",
    "in flight",
    "request",
    "earlier",
    "summary",
    "calib mape",
)


def _share(kept: int | None, total: int | None) -> str:
    return "-" if not total else f"{kept}/{total}"


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def _recall(ids: dict[str, Any]) -> str:
    return "-" if ids["recall"] is None else f"{ids['recall']:.0%} ({ids['kept']}/{ids['total']})"


def failed(r: dict[str, Any]) -> bool:
    """A row of a file that could not be measured (``eval`` with several files goes on past it)."""
    return "tokens" not in r


def row(r: dict[str, Any]) -> list[str]:
    if failed(r):
        return [r["file"], r["strategy"], f"error (exit {r['exit_code']})"] + ["-"] * (len(COLUMNS) - 3)
    t, probes, cal = r["tokens"], r.get("probes"), r.get("calibration")
    return [
        r["file"],
        r["strategy"],
        f"{t['before']:,}→{t['after']:,}",
        _yes(r["fits"]),
        _yes(r["valid"]),
        _yes(r["latest_request"]["kept_verbatim"]),
        _share(r["rules"]["kept_verbatim"], r["rules"]["found"]),
        _share(r["todos"]["kept"], r["todos"]["open"]),
        _yes(r["errors"]["status_kept"]),
        _recall(r["identifiers"]),
        _recall(r["baseline"]["identifiers"]),
        "-" if not probes else _share(probes["found"], probes["total"]),
        _probes(r["baseline"]),
        _probes(r["baseline_head"]),
        _flight(r["handoff"]["in_flight"]),
        _status(r["handoff"]["request"]),
        _earlier(r["handoff"]["earlier_summaries"]),
        _summary(r["summary_budget"]),
        _calibration(cal),
    ]


def _probes(side: dict[str, Any]) -> str:
    p = side.get("probes")
    return "-" if not p else _share(p["found"], p["total"])


def _flight(f: dict[str, Any]) -> str:
    """``-`` when the transcript does not end inside a tool loop, else whether its result is visible."""
    return "-" if not f["open"] else "visible" if f["present"] else "MISSING"


def _status(req: dict[str, Any]) -> str:
    if req["status"] is None:
        return "-"
    if req["answer_visible"] is None:
        return str(req["status"])
    return f"{req['status']}{'' if req['answer_visible'] else ' (answer lost)'}"


def _earlier(e: dict[str, Any]) -> str:
    """Earlier summaries carried / found (``-`` without one)."""
    return _share(e["carried"], e["found"])


def _summary(s: dict[str, Any] | None) -> str:
    """The summary's tokens / its budget, by the window's counter; ``!`` when over."""
    if s is None:
        return "-"
    return f"{s['tokens']:,}/{s['budget']:,}{'' if s['within'] else '!'}"


def _calibration(cal: dict[str, Any] | None) -> str:
    if not cal:
        return "-"
    first = f"first {cal['first']['error']:+.0%}"
    if cal["mape"] is None:
        return first
    return f"{cal['mape']:.1%} ({cal['undercounts']} under; {first})"


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.0%}" if values else "-"


def mean_row(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Means of the shares over the rows that have something to score (a failed file has nothing)."""
    rows = [r for r in rows if not failed(r)]

    def shares(get: Any) -> list[float]:
        out = []
        for r in rows:
            kept, total = get(r)
            if total:
                out.append(kept / total)
        return out

    return [
        f"mean ({len(rows)})",
        "",
        "",
        _mean([float(r["fits"]) for r in rows]),
        _mean([float(r["valid"]) for r in rows]),
        _mean(
            [
                float(r["latest_request"]["kept_verbatim"])
                for r in rows
                if r["latest_request"]["kept_verbatim"] is not None
            ]
        ),
        _mean(shares(lambda r: (r["rules"]["kept_verbatim"], r["rules"]["found"]))),
        _mean(shares(lambda r: (r["todos"]["kept"], r["todos"]["open"]))),
        _mean([float(r["errors"]["status_kept"]) for r in rows if r["errors"]["status_kept"] is not None]),
        _mean(shares(lambda r: (r["identifiers"]["kept"], r["identifiers"]["total"]))),
        _mean(
            shares(lambda r: (r["baseline"]["identifiers"]["kept"], r["baseline"]["identifiers"]["total"]))
        ),
        _mean(shares(lambda r: (r["probes"]["found"], r["probes"]["total"]) if r.get("probes") else (0, 0))),
        _mean(shares(lambda r: _found(r["baseline"]))),
        _mean(shares(lambda r: _found(r["baseline_head"]))),
        _mean([float(bool(f["present"])) for f in (r["handoff"]["in_flight"] for r in rows) if f["open"]]),
        "",
        _mean(shares(lambda r: (r["handoff"]["earlier_summaries"]["carried"],
                                r["handoff"]["earlier_summaries"]["found"]))),
        _mean([float(r["summary_budget"]["within"]) for r in rows if r["summary_budget"] is not None]),
        "",
    ]


def _found(side: dict[str, Any]) -> tuple[int, int]:
    p = side.get("probes")
    return (p["found"], p["total"]) if p else (0, 0)


def table(rows: Sequence[dict[str, Any]]) -> str:
    body = [list(COLUMNS)] + [row(r) for r in rows]
    if len(rows) > 1:
        body.append(mean_row(rows))
    widths = [max(len(line[i]) for line in body) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in body
    )


def chart(replay: dict[str, Any], width: int = 60, height: int = 10) -> str:
    """Context tokens per turn as a text chart: `#` a turn, `*` a turn where run compacted, `-` the window."""
    series = replay["series"]
    if not series:
        return "replay: no assistant turn"
    window = replay["window"]
    top = max(window, replay["max_tokens"]) or 1
    step = max(1, -(-len(series) // width))
    cols = [series[i : i + step] for i in range(0, len(series), step)]
    lines = []
    for level in range(height, 0, -1):
        floor = top * (level - 1) / height
        ceil = top * level / height
        cells = []
        for col in cols:
            tokens = max(p["tokens"] for p in col)
            if tokens > floor:
                cells.append("*" if any(p["compacted"] for p in col) else "#")
            elif floor < window <= ceil:
                cells.append("-")
            else:
                cells.append(" ")
        label = f"{int(ceil):>8,} |" if level in (height, 1) else "         |"
        if floor < window <= ceil:
            label = f"{window:>8,} -"
        lines.append(label + "".join(cells))
    lines.append("         +" + "-" * len(cols))
    lines.append(
        f"          {len(series)} turns, {replay['compactions']} compactions (*), "
        f"max {replay['max_tokens']:,} of a {window:,}-token window (-)"
    )
    return "\n".join(lines)
