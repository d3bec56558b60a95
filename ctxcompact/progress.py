"""A progress indicator on stderr for long work, shown only when stderr is a terminal
(docs/reference/cli.md#input-output-and-options)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_FRAMES = "|/-\\"


@contextmanager
def progress(label: str, stream: TextIO | None = None, interval: float = 0.2) -> Iterator[None]:
    """Show ``label`` with a spinner and elapsed seconds while the block runs; nothing when not a TTY."""
    out = stream if stream is not None else sys.stderr
    if not _is_tty(out):
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def spin() -> None:
        i = 0
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
        out.write("\r\x1b[K")
        out.flush()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
