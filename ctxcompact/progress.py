"""What a user sees on long work (docs/guides/hooks.md#progress-on-stderr): a spinner for one long step and a
bar for many items (files, replayed turns), on stderr, only when stderr is a terminal, never under ``-q``.

Nothing is drawn before ``delay`` seconds, so a quick command prints nothing at all; the line is cleared when
the work ends. While a bar is shown, the spinners of the steps inside it stay silent (one line, one owner).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_FRAMES = "|/-\\"
_state = {"quiet": False, "bar": False}


def set_quiet(quiet: bool = True) -> None:
    """``-q``: no spinner and no bar in this process, whatever stderr is."""
    _state["quiet"] = quiet


def _shown(stream: TextIO) -> bool:
    return not _state["quiet"] and not _state["bar"] and _is_tty(stream)


@contextmanager
def progress(label: str, stream: TextIO | None = None, interval: float = 0.2,
             delay: float = 0.5) -> Iterator[None]:
    """Show ``label`` with a spinner and elapsed seconds while the block runs, from ``delay`` seconds on;
    nothing when not a TTY."""
    out = stream if stream is not None else sys.stderr
    if not _shown(out):
        yield
        return
    stop = threading.Event()
    start = time.monotonic()
    drawn = threading.Event()

    def spin() -> None:
        i = 0
        if stop.wait(delay):
            return
        drawn.set()
        while not stop.wait(interval):
            out.write(f"\r{_FRAMES[i % len(_FRAMES)]} {label} {time.monotonic() - start:5.1f}s")
            out.flush()
            i += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if drawn.is_set():
            out.write("\r\x1b[K")
            out.flush()


class Bar:
    """``advance()`` after each item; draws ``label [#####.....] done/total  item`` at most every
    ``interval`` seconds, from ``delay`` seconds on. A Bar that is not shown does nothing."""

    def __init__(self, total: int, label: str, out: TextIO | None, delay: float, interval: float,
                 width: int = 30) -> None:
        self.total, self.label, self.out = max(total, 0), label, out
        self.delay, self.interval, self.width = delay, interval, width
        self.done = 0
        self.start = time.monotonic()
        self.last = float("-inf")
        self.drawn = False

    def advance(self, item: str = "", n: int = 1) -> None:
        self.done += n
        if self.out is None:
            return
        now = time.monotonic()
        if now - self.start < self.delay or (now - self.last < self.interval and self.done < self.total):
            return
        self.last = now
        self.out.write("\r\x1b[K" + self.line(item))
        self.out.flush()
        self.drawn = True

    def hide(self) -> None:
        """Clear the bar before printing a line of output; the next ``advance`` draws it again."""
        if self.out is not None and self.drawn:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.drawn = False
            self.last = float("-inf")

    def line(self, item: str = "") -> str:
        filled = self.width * min(self.done, self.total) // self.total if self.total else self.width
        text = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total}"
        return f"{text}  {item[-40:]}" if item else text

    def close(self) -> None:
        if self.out is not None and self.drawn:
            self.out.write("\r\x1b[K")
            self.out.flush()


@contextmanager
def bar(total: int, label: str, stream: TextIO | None = None, delay: float = 0.5,
        interval: float = 0.1, enabled: bool = True) -> Iterator[Bar]:
    """A progress bar over ``total`` items on stderr (a terminal only, not under ``-q``); the spinners and
    bars of the steps inside are silent while it is shown. ``total`` may be set later (``bar.total = n``);
    a bar not ``enabled`` is never shown and silences nothing."""
    out = stream if stream is not None else sys.stderr
    shown = enabled and _shown(out)
    b = Bar(total, label, out if shown else None, delay, interval)
    outer = _state["bar"]
    _state["bar"] = outer or shown
    try:
        yield b
    finally:
        _state["bar"] = outer
        b.close()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
