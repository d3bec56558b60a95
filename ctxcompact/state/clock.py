"""The time the state's entries are stamped with (a compaction, a summary, a calibration, a strategy's own
records): its own module so that :mod:`.compacted` and :mod:`.model` both take it without importing each
other."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """The current UTC time as ISO-8601 with a ``Z`` suffix (millisecond precision)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
