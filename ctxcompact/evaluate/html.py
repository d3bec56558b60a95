"""`eval --html FILE`: one self-contained page (inline SVG, inline CSS, no network resource) with the score
table and, with ``--replay``, a chart of context tokens per turn (docs/guides/eval.md#replay-replay)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .render import COLUMNS, mean_row, row

_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}"
    "svg{border:1px solid #ccc;margin:1em 0}"
)


def svg(replay: dict[str, Any], width: int = 640, height: int = 240) -> str:
    """Context tokens per turn (line), compactions (red dots) and the window (dashed line)."""
    series = replay["series"]
    if not series:
        return "<p>no assistant turn</p>"
    top = max(replay["window"], replay["max_tokens"]) * 1.05 or 1
    step = width / max(1, len(series) - 1)

    def y(tokens: float) -> float:
        return round(height - tokens / top * height, 1)

    points = " ".join(f"{round(i * step, 1)},{y(p['tokens'])}" for i, p in enumerate(series))
    dots = "".join(
        f'<circle cx="{round(i * step, 1)}" cy="{y(p["tokens"])}" r="4" fill="#c00">'
        f"<title>line {p['line']}: compacted to {p['tokens']:,}</title></circle>"
        for i, p in enumerate(series)
        if p["compacted"]
    )
    wy = y(replay["window"])
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="-5 -5 {width + 10} {height + 10}">'
        f'<line x1="0" y1="{wy}" x2="{width}" y2="{wy}" stroke="#888" stroke-dasharray="6 4"/>'
        f'<text x="4" y="{wy - 4}" font-size="11">window {replay["window"]:,}</text>'
        f'<polyline fill="none" stroke="#06c" stroke-width="2" points="{points}"/>{dots}</svg>'
    )


def page(rows: Sequence[dict[str, Any]]) -> str:
    body = [list(COLUMNS)] + [row(r) for r in rows] + ([mean_row(rows)] if len(rows) > 1 else [])
    head = "".join(f"<th>{escape(c)}</th>" for c in body[0])
    cells = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in line) + "</tr>" for line in body[1:])
    charts = "".join(
        f"<h2>Replay of {escape(r['file'])} ({escape(r['strategy'])})</h2>"
        f"<p>{r['replay']['turns']} turns, {r['replay']['compactions']} compactions, "
        f"max {r['replay']['max_tokens']:,} tokens</p>{svg(r['replay'])}"
        for r in rows
        if "replay" in r
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>ctxcompact eval</title>'
        f"<style>{_STYLE}</style></head><body><h1>ctxcompact eval</h1>"
        f"<table><tr>{head}</tr>{cells}</table>{charts}</body></html>\n"
    )
