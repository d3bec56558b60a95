"""The sidecar state file (docs/concepts/state.md#the-state-file): watermark, prefix fingerprint, summary,
calibration and history.

Why it exists: the transcript is append-only and ctxcompact never rewrites its input, so a compaction only
lasts if the next run knows which records the summary already covers. That count is the *watermark*: on the
next run the first ``watermark`` records are replaced by the stored summary and only newer records follow
it. Without it every run would rebuild the full context and compact again, forever.

The *fingerprint* ties the state to one transcript: the byte length and SHA-256 of the input prefix holding
the covered records. A run on a transcript whose prefix changed stops with exit 3 instead of silently
dropping records that the summary never saw. Because the prefix is byte-identical from run to run, the
state can also cache its token counts and where its system records are, so a run on a transcript that
only grew needs to parse and count only the new records.

The file is JSON, versioned, checked against ``schemas/state.schema.json`` on every load and save, written
atomically (:mod:`ctxcompact.atomic`) and guarded by a lock file (:func:`state_lock`) so two concurrent runs
on one state cannot lose each other's update. Secrets never reach it: nothing here takes API keys or
headers, and the schema closes every object it defines.
"""


from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .calibration import record_estimate, record_real_tokens, remember_measured, reset_calibration
from .fingerprint import HashedFile, check_fingerprint, line_end, make_fingerprint, prefix_fingerprint
from .lock import state_lock
from .model import (
    EMPTY_SHA256,
    STATE_VERSION,
    Calibration,
    Fingerprint,
    InputInfo,
    Section,
    State,
    add_compaction,
    new_state,
    set_watermark,
    utc_now,
)
from .store import (
    check_is_state,
    default_state_path,
    dump_state,
    load_state,
    parse_state,
    reset_state,
    save_state,
    stage_state,
    validate_state,
)

if TYPE_CHECKING:
    from .compacted import Compaction, Summary, TokenCache

#: what only a compaction writes (:mod:`.compacted`), loaded on first use
_COMPACTED = ("Compaction", "Summary", "TokenCache")


def __getattr__(name: str) -> Any:
    if name in _COMPACTED:
        from . import compacted

        return getattr(compacted, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EMPTY_SHA256",
    "STATE_VERSION",
    "Calibration",
    "Compaction",
    "Fingerprint",
    "HashedFile",
    "InputInfo",
    "Section",
    "State",
    "Summary",
    "TokenCache",
    "add_compaction",
    "check_fingerprint",
    "check_is_state",
    "default_state_path",
    "dump_state",
    "line_end",
    "load_state",
    "make_fingerprint",
    "new_state",
    "parse_state",
    "prefix_fingerprint",
    "record_estimate",
    "record_real_tokens",
    "remember_measured",
    "reset_calibration",
    "reset_state",
    "save_state",
    "set_watermark",
    "stage_state",
    "state_lock",
    "utc_now",
    "validate_state",
]
