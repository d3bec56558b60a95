"""What the next call sees after a compaction, on real logs with hand-written probes (issue 23's table): per
probe category, ctxcompact against the two naive baselines at the same token budget (the tail; the first 200
characters of each message), the recall after the 1st, 2nd and 3rd+ compaction of a growing session, the
in-flight result, the request status, earlier summaries and the summary's tokens against its budget.

The probe sets and the window of each log are in tests/data/probes/sets.json (docs/guides/eval.md#probes).
Everything runs in process through the public API (``api.evaluate``, ``api.replay``), offline, with the
extractive summarizer; nothing is written beside the logs.

    python bench/fidelity.py                  # the whole table, ~2-4 min on 2 cores
    python bench/fidelity.py --no-replay      # one compaction only (~30 s)
    python bench/fidelity.py --json out.json  # also every eval object, for a diff after a change
    python bench/fidelity.py --held-out       # only the held-out sets (never tuned on)

The summary table is printed for every set, then apart for the sets the summary was tuned on and the held-out
ones (``held_out`` in sets.json: written before the work on the summary's content, never tuned on).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
SETS = DATA / "probes" / "sets.json"
SIDES = ("ctxcompact", "tail", "head")
CATEGORIES = ("rules", "request", "files", "errors", "identifiers", "decisions", "todos", "skill")

sys.path.insert(0, str(REPO))
from ctxcompact import api  # noqa: E402
from ctxcompact.engine import run  # noqa: E402
from ctxcompact.evaluate.baseline import heads, truncate  # noqa: E402
from ctxcompact.evaluate.core import original_records, read_input, written_context  # noqa: E402
from ctxcompact.evaluate.probes import Probe  # noqa: E402
from ctxcompact.evaluate.replay import turn_starts  # noqa: E402
from ctxcompact.evaluate.scores import compare  # noqa: E402
from ctxcompact.model import Record, Transcript, token_text  # noqa: E402
from ctxcompact.tokens.counts import count_records  # noqa: E402


def load_sets() -> list[dict[str, Any]]:
    sets: list[dict[str, Any]] = json.loads(SETS.read_text(encoding="utf-8"))["sets"]
    return sets


def one_compaction(entry: dict[str, Any]) -> dict[str, Any]:
    """`eval` of the log at its window, with its probes (the baselines come with it)."""
    probes = api.load_probes(DATA / "probes" / entry["probes"])
    opts = api.Options(window=entry["window"])
    result: dict[str, Any] = api.evaluate(str(DATA / entry["log"]), opts, probes, calibration=False)
    return result


def growing(entry: dict[str, Any]) -> dict[str, Any]:
    """`eval --replay` of the log at its replay window: the recall after each compaction."""
    probes = api.load_probes(DATA / "probes" / entry["probes"])
    opts = api.Options(window=entry["replay_window"])
    result: dict[str, Any] = api.replay(str(DATA / entry["log"]), opts, probes)
    return result


def _found(probes: Sequence[Probe], text: str) -> dict[str, list[int]]:
    """Found and total per category (and "all") of ``probes`` in ``text``."""
    out: dict[str, list[int]] = {}
    for p in probes:
        for key in ("all", p.category or "other"):
            cell = out.setdefault(key, [0, 0])
            cell[0] += p.found_in(text)
            cell[1] += 1
    return out


def growing_sides(entry: dict[str, Any]) -> list[dict[str, dict[str, list[int]]]]:
    """After each compaction of the growing session (``run`` with a state before each assistant turn, as
    `eval --replay` does): the probes the session had shown by then, per category, found in what the next
    call sees, and in the two naive baselines of the session so far given the same tokens (the tail; the first
    200 characters of each message, then the tail)."""
    probes = api.load_probes(DATA / "probes" / entry["probes"])
    opts = api.Options(window=entry["replay_window"])
    _, data, fmt = read_input(str(DATA / entry["log"]), opts)
    original = original_records(data, fmt, opts)
    points: list[dict[str, dict[str, list[int]]]] = []
    with tempfile.TemporaryDirectory(prefix="ctxcompact-fidelity-") as tmp:
        log, state = Path(tmp) / "session.jsonl", Path(tmp) / "session.ctxstate.json"
        ropts = dataclasses.replace(opts, state_path=state, use_state=True, reset_state=False, format=fmt,
                                    keep_trailing_results=True)
        for i in turn_starts(original):
            log.write_bytes(data[: original[i].offset])
            result = run(log, ropts, output=None, warn=lambda _: None)
            if not result.compacted:
                continue
            prefix = original[:i]
            shown = "\n".join(t for r in prefix if r.message is not None for t in token_text(r.message)[0])
            answerable = [p for p in probes if p.found_in(shown)]
            cal = result.estimate.calibrated
            written = written_context(result, ropts, prefix)
            point = {"ctxcompact": _found(answerable, compare(prefix, written).text)}
            for side, context in (("tail", Transcript(fmt, list(prefix))),
                                  ("head", heads(Transcript(fmt, list(prefix))))):
                base = dict(zip((id(r) for r in context.records), count_records(context.records, ropts).base,
                                strict=True))

                def tokens_of(subset: list[Record], base: dict[int, int] = base, cal: Any = cal) -> int:
                    return int(cal.project(sum(base[id(r)] for r in subset)))

                kept = truncate(context, result.tokens_after, tokens_of)
                point[side] = _found(answerable, compare(prefix, kept).text)
            points.append(point)
    return points


def _add(acc: dict[str, list[int]], key: str, found: int, total: int) -> None:
    cell = acc.setdefault(key, [0, 0])
    cell[0] += found
    cell[1] += total


def _pct(cell: list[int] | None) -> str:
    if not cell or not cell[1]:
        return "-"
    return f"{cell[0] / cell[1]:.0%} ({cell[0]}/{cell[1]})"


def aggregate(evals: list[dict[str, Any]], replays: list[dict[str, Any]],
              curves: list[list[dict[str, dict[str, list[int]]]]] | None = None) -> dict[str, Any]:
    """The summed figures of every row of the table (found, total) from the eval and replay objects."""
    sides = {"ctxcompact": lambda r: r["probes"], "tail": lambda r: r["baseline"]["probes"],
             "head": lambda r: r["baseline_head"]["probes"]}
    probes: dict[str, dict[str, list[int]]] = {side: {} for side in sides}
    for r in evals:
        if not r["compacted"]:
            continue
        for side, get in sides.items():
            p = get(r)
            _add(probes[side], "all", p["found"], p["total"])
            for cat, c in p["by_category"].items():
                _add(probes[side], cat, c["found"], c["total"])
    out: dict[str, Any] = {"probes": probes, "logs": len(evals),
                           "compacted": sum(r["compacted"] for r in evals)}
    curve: dict[str, list[int]] = {}
    verbatim: dict[str, list[int]] = {}
    for rep in replays:
        for point in rep["curve"]:
            if point["compaction"] <= 3:
                _add(curve, str(point["compaction"]), point["found"], point["answerable"])
            _add(verbatim, "rules", point["rules_kept"], point["rules"])
            if point["latest_request_kept"] is not None:
                _add(verbatim, "request", int(point["latest_request_kept"]), 1)
            if point["in_flight"] is not None:
                _add(verbatim, "in_flight", int(point["in_flight"]), 1)
        if len(rep["curve"]) >= 3:  # the most compacted point of each session that reached three
            last = rep["curve"][-1]
            _add(curve, "last", last["found"], last["answerable"])
    for r in evals:
        if r["compacted"]:
            _add(verbatim, "rules", r["rules"]["kept_verbatim"], r["rules"]["found"])
            if r["latest_request"]["kept_verbatim"] is not None:
                _add(verbatim, "request", int(r["latest_request"]["kept_verbatim"]), 1)
    out["curve"], out["verbatim"] = curve, verbatim
    handoff: dict[str, list[int]] = {}
    for r in evals:
        h = r["handoff"]
        if h["in_flight"]["open"]:
            _add(handoff, "in_flight", int(bool(h["in_flight"]["present"])), 1)
        if h["request"]["answer_visible"] is not None:
            _add(handoff, "answer", int(h["request"]["answer_visible"]), 1)
        e = h["earlier_summaries"]
        if e["found"]:
            _add(handoff, "earlier", e["carried"], e["found"])
        if r["summary_budget"] is not None:
            _add(handoff, "budget", int(r["summary_budget"]["within"]), 1)
    out["handoff"] = handoff
    by_k: dict[str, dict[str, dict[str, list[int]]]] = {}
    for session in curves or []:
        for k, point in enumerate(session[:3], start=1):
            for side, cells in point.items():
                for cat, (found, total) in cells.items():
                    _add(by_k.setdefault(str(k), {}).setdefault(side, {}), cat, found, total)
    out["sides"] = by_k
    return out


def render(agg: dict[str, Any], evals: list[dict[str, Any]], replays: list[dict[str, Any]],
           entries: list[dict[str, Any]], title: str = "all sets", rows: bool = True) -> str:
    p = agg["probes"]
    lines = [
        f"### {title}: {agg['compacted']} of {agg['logs']} logs compacted at their window",
        "",
        "| what | ctxcompact | naive tail | first 200 chars of each message |",
        "|---|---|---|---|",
    ]
    for row, key in (("all probes, one compaction", "all"), *((cat, cat) for cat in CATEGORIES)):
        lines.append(f"| {row} | " + " | ".join(_pct(p[s].get(key)) for s in SIDES) + " |")
    c = agg["curve"]
    if replays:
        lines.append("| growing session, probes shown so far, after 1 / 2 / 3 compactions | "
                     f"{_pct(c.get('1'))} / {_pct(c.get('2'))} / {_pct(c.get('3'))} | | |")
        lines.append("| the same after the last compaction (sessions with 3 or more) | "
                     f"{_pct(c.get('last'))} | | |")
    if agg.get("sides"):
        lines += ["", "| after k compactions of a growing session (probes shown so far) | k | ctxcompact "
                  "| naive tail | first 200 chars of each message |", "|---|---|---|---|---|"]
        for cat in ("all", *CATEGORIES):
            for k in ("1", "2", "3"):
                cells = agg["sides"].get(k, {})
                if cells.get("ctxcompact", {}).get(cat):
                    row = " | ".join(_pct(cells[s].get(cat)) for s in SIDES)
                    lines.append(f"| {cat} | {k} | {row} |")
        lines += ["", "| what | ctxcompact | naive tail | first 200 chars of each message |",
                  "|---|---|---|---|"]
    v, h = agg["verbatim"], agg["handoff"]
    lines += [
        f"| rules verbatim, after any compaction | {_pct(v.get('rules'))} | | |",
        f"| latest request verbatim, after any compaction | {_pct(v.get('request'))} | | |",
        f"| in-flight result visible (logs ending in a tool loop) | {_pct(h.get('in_flight'))} | | |",
        f"| in-flight result visible, replayed hook calls that compacted | {_pct(v.get('in_flight'))} | | |",
        f"| answered request: the answer visible | {_pct(h.get('answer'))} | | |",
        f"| earlier summaries carried | {_pct(h.get('earlier'))} | | |",
        f"| summary ≤ its budget (the window's counter) | {_pct(h.get('budget'))} | | |",
    ]
    if not rows:
        return "\n".join(lines)
    lines += [
        "",
        "| log | window | tokens | probes (ctx / tail / head) | in flight | request | summary / budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for e, r in zip(entries, evals, strict=True):
        t, s = r["tokens"], r["summary_budget"]
        probes = " / ".join(f"{x['probes']['found']}/{x['probes']['total']}"
                            for x in (r, r["baseline"], r["baseline_head"]))
        fl = r["handoff"]["in_flight"]
        flight = "-" if not fl["open"] else ("visible" if fl["present"] else "MISSING")
        req = r["handoff"]["request"]
        status = f"{req['status']}" + ("" if req["answer_visible"] is None else
                                       f" (answer {'visible' if req['answer_visible'] else 'not visible'})")
        summ = "-" if s is None else f"{s['tokens']:,} / {s['budget']:,}"
        name = (Path(e["log"]).name + ("" if not e["seen"] else " (seen)")
                + (" (held out)" if e.get("held_out") else ""))
        lines.append(f"| {name} | {e['window']:,} | {t['before']:,}→{t['after']:,} | {probes} | {flight} | "
                     f"{status} | {summ} |")
    if replays:
        lines += ["", "| growing session | window | turns | compactions | recall after each compaction |",
                  "|---|---|---|---|---|"]
        for e, rep in zip([e for e in entries if e["replay_window"]], replays, strict=True):
            pts = ", ".join(f"{q['found']}/{q['answerable']}" for q in rep["curve"][:8])
            more = " …" if len(rep["curve"]) > 8 else ""
            lines.append(f"| {Path(e['log']).name} | {e['replay_window']:,} | {rep['turns']} | "
                         f"{rep['compactions']} | {pts}{more} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-replay", action="store_true", help="skip the growing sessions")
    ap.add_argument("--json", type=Path, help="also write every eval and replay object here")
    ap.add_argument("--held-out", action="store_true", help="only the held-out sets")
    args = ap.parse_args(argv)
    entries = [e for e in load_sets() if e.get("held_out") or not args.held_out]
    start = time.perf_counter()
    evals = [one_compaction(e) for e in entries]
    replayed = [e for e in entries if e["replay_window"]]
    replays = [] if args.no_replay else [growing(e) for e in replayed]
    sides = [] if args.no_replay else [growing_sides(e) for e in replayed]
    agg = aggregate(evals, replays, sides)
    print(render(agg, evals, replays, entries))
    for title, held in (("tuned on", False), ("held out", True)):
        pick = [i for i, e in enumerate(entries) if bool(e.get("held_out")) == held]
        rpick = [i for i, e in enumerate(replayed) if bool(e.get("held_out")) == held and replays]
        if pick and len(pick) < len(entries):
            sub = [replays[i] for i in rpick]
            part = aggregate([evals[i] for i in pick], sub, [sides[i] for i in rpick])
            print()
            print(render(part, [], sub, [], title, rows=False))
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if args.json:
        everything = {"evals": evals, "replays": replays, "sides": sides, "aggregate": agg}
        args.json.write_text(json.dumps(everything, indent=1,
                                        default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
