"""The sidecar state file (SPEC §7): watermark, prefix fingerprint, summary, calibration and history.

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

import contextlib
import copy
import functools
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import orjson

from .atomic import atomic_write
from .errors import InputError, StateError, UsageError
from .summarizers.base import SummaryResult

__all__ = [
    "EMPTY_SHA256",
    "STATE_VERSION",
    "Calibration",
    "Compaction",
    "Event",
    "Fingerprint",
    "InputInfo",
    "State",
    "Summary",
    "TokenCache",
    "add_compaction",
    "check_fingerprint",
    "default_state_path",
    "dump_state",
    "load_state",
    "make_fingerprint",
    "new_state",
    "prefix_fingerprint",
    "record_estimate",
    "record_real_tokens",
    "reset_calibration",
    "reset_state",
    "save_state",
    "set_watermark",
    "state_lock",
    "utc_now",
    "validate_state",
]

STATE_VERSION = 1
STATE_SUFFIX = ".ctxstate.json"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: §5: the correction factor is clamped to this range so one odd turn cannot distort all later ones.
MIN_FACTOR = 1.0
MAX_FACTOR = 5.0
_CHUNK = 1 << 20
_STRATEGIES = ("threshold", "sliding-window", "mask")

Source: TypeAlias = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO


def utc_now() -> str:
    """The current UTC time as ISO-8601 with a ``Z`` suffix (millisecond precision)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------- model


@dataclass(slots=True)
class TokenCache:
    """Token counts of the covered prefix (``fingerprint.tokens``)."""

    heuristic: int | None = None
    exact: int | None = None
    encoding: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"heuristic": self.heuristic, "exact": self.exact, "encoding": self.encoding}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TokenCache:
        return cls(heuristic=d.get("heuristic"), exact=d.get("exact"), encoding=d.get("encoding"))


@dataclass(slots=True)
class Fingerprint:
    """The covered prefix: the first ``records`` records are the first ``nbytes`` bytes (JSON key ``bytes``)
    of the input, whose SHA-256 is ``sha256``. ``system_lines`` are ``(offset, length)`` of the system records
    inside that prefix, line endings excluded."""

    records: int = 0
    nbytes: int = 0
    sha256: str = EMPTY_SHA256
    format: str = ""
    tokens: TokenCache | None = None
    system_lines: list[tuple[int, int]] = field(default_factory=list)
    lines: int | None = None  # physical lines of the prefix (blank ones too), for line numbers after it

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"records": self.records, "bytes": self.nbytes}
        if self.lines is not None:
            d["lines"] = self.lines
        d.update({"sha256": self.sha256, "format": self.format})
        if self.tokens is not None:
            d["tokens"] = self.tokens.to_json()
        d["system_lines"] = [[off, n] for off, n in self.system_lines]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fingerprint:
        tokens = d.get("tokens")
        return cls(records=d["records"], nbytes=d["bytes"], sha256=d["sha256"], format=d["format"],
                   tokens=TokenCache.from_json(tokens) if tokens is not None else None,
                   system_lines=[(int(off), int(n)) for off, n in d["system_lines"]], lines=d.get("lines"))


@dataclass(slots=True)
class Summary:
    """The current summary: what replaces the first ``watermark`` records, and how it was made."""

    text: str
    summarizer: str
    model: str | None = None
    fallback: bool = False
    fallback_reason: str | None = None
    created_at: str = field(default_factory=utc_now)
    records_covered: int = 0
    latest_request: str | None = None
    facts: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float = 0.0
    continuation: str | None = None  # the continuation text written after it, reused verbatim later
    truncated: bool = False

    @classmethod
    def from_result(cls, result: SummaryResult, *, records_covered: int, latest_request: str | None = None,
                    continuation: str | None = None) -> Summary:
        """The state's record of a summarizer's result covering the first ``records_covered`` records."""
        return cls(text=result.text, summarizer=result.summarizer, model=result.model,
                   fallback=result.fallback, fallback_reason=result.fallback_reason,
                   records_covered=records_covered, latest_request=latest_request,
                   facts=copy.deepcopy(result.facts), input_tokens=result.input_tokens,
                   output_tokens=result.output_tokens, duration_s=float(result.duration_s),
                   continuation=continuation, truncated=result.truncated)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "summarizer": self.summarizer, "model": self.model,
                "fallback": self.fallback, "fallback_reason": self.fallback_reason,
                "continuation": self.continuation, "truncated": self.truncated,
                "created_at": self.created_at, "records_covered": self.records_covered,
                "latest_request": self.latest_request, "facts": copy.deepcopy(self.facts),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "duration_s": self.duration_s}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        return cls(text=d["text"], summarizer=d["summarizer"], model=d.get("model"), fallback=d["fallback"],
                   fallback_reason=d.get("fallback_reason"), created_at=d["created_at"],
                   records_covered=d["records_covered"], latest_request=d.get("latest_request"),
                   facts=copy.deepcopy(d.get("facts")), input_tokens=d.get("input_tokens"),
                   output_tokens=d.get("output_tokens"), duration_s=float(d.get("duration_s", 0.0)),
                   continuation=d.get("continuation"), truncated=d.get("truncated", False))


@dataclass(slots=True)
class Calibration:
    """§5 calibration. ``real`` and ``last_estimate`` always describe the same request; ``factor`` is the
    last correction measured from such a pair (clamped to [1, 5]), kept when a new estimate is recorded."""

    real: int | None = None
    last_estimate: int | None = None
    estimator: str | None = None
    factor: float | None = None
    updated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"real": self.real, "last_estimate": self.last_estimate, "estimator": self.estimator,
                "factor": self.factor, "updated_at": self.updated_at}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Calibration:
        factor = d["factor"]
        return cls(real=d["real"], last_estimate=d["last_estimate"], estimator=d["estimator"],
                   factor=float(factor) if factor is not None else None, updated_at=d["updated_at"])


@dataclass(slots=True)
class Compaction:
    """One entry of the compaction history."""

    time: str
    strategy: str
    tokens_before: int
    tokens_after: int
    records_covered: int
    watermark: int
    summarizer: str | None
    fallback: bool
    duration_s: float
    tier: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time": self.time, "strategy": self.strategy,
                             "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                             "records_covered": self.records_covered,
                             "watermark": self.watermark, "summarizer": self.summarizer,
                             "fallback": self.fallback, "duration_s": self.duration_s}
        if self.tier is not None:
            d["tier"] = self.tier
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Compaction:
        return cls(time=d["time"], strategy=d["strategy"], tokens_before=d["tokens_before"],
                   tokens_after=d["tokens_after"], records_covered=d["records_covered"],
                   watermark=d["watermark"], summarizer=d["summarizer"], fallback=d["fallback"],
                   duration_s=float(d["duration_s"]), tier=d.get("tier"))


@dataclass(slots=True)
class Event:
    """A sliding-window compaction event (§9): input records ``[start, end)`` replaced by ``summary``."""

    start: int
    end: int
    invocations: int
    records: int
    original_tokens: int
    compacted_tokens: int
    ratio: float
    summary: str
    summarizer: str
    fallback: bool = False
    created_at: str = field(default_factory=utc_now)
    start_timestamp: float | str | None = None
    end_timestamp: float | str | None = None
    model: str | None = None
    first_invocation: int | None = None  # 1-based numbers of the invocations covered
    last_invocation: int | None = None
    invocation_ids: list[str] | None = None  # the format's own ids (ADK invocation_id), where it has them

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end}
        if self.start_timestamp is not None:
            d["start_timestamp"] = self.start_timestamp
        if self.end_timestamp is not None:
            d["end_timestamp"] = self.end_timestamp
        d["invocations"] = self.invocations
        if self.first_invocation is not None:
            d["first_invocation"] = self.first_invocation
            d["last_invocation"] = self.last_invocation
        if self.invocation_ids:
            d["invocation_ids"] = list(self.invocation_ids)
        d.update({"records": self.records,
                  "original_tokens": self.original_tokens, "compacted_tokens": self.compacted_tokens,
                  "ratio": self.ratio, "summary": self.summary, "summarizer": self.summarizer})
        if self.model is not None:
            d["model"] = self.model
        d.update({"fallback": self.fallback, "created_at": self.created_at})
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        return cls(start=d["start"], end=d["end"], invocations=d["invocations"], records=d["records"],
                   original_tokens=d["original_tokens"], compacted_tokens=d["compacted_tokens"],
                   ratio=float(d["ratio"]), summary=d["summary"], summarizer=d["summarizer"],
                   fallback=d["fallback"], created_at=d["created_at"],
                   start_timestamp=d.get("start_timestamp"), end_timestamp=d.get("end_timestamp"),
                   model=d.get("model"), first_invocation=d.get("first_invocation"),
                   last_invocation=d.get("last_invocation"), invocation_ids=d.get("invocation_ids"))


@dataclass(slots=True)
class InputInfo:
    """The input the state was last used with (informational; the fingerprint is what is checked)."""

    path: str | None = None
    format: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InputInfo:
        return cls(path=d.get("path"), format=d.get("format"))


@dataclass(slots=True)
class State:
    """The whole state file. ``extra`` holds the ``x-…`` keys users or tools put there, carried through."""

    version: int = STATE_VERSION
    watermark: int = 0
    fingerprint: Fingerprint = field(default_factory=Fingerprint)
    summary: Summary | None = None
    calibration: Calibration = field(default_factory=Calibration)
    compactions: list[Compaction] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    masking: dict[str, Any] | None = None
    input: InputInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": self.version,
            "watermark": self.watermark,
            "fingerprint": self.fingerprint.to_json(),
            "summary": self.summary.to_json() if self.summary is not None else None,
            "calibration": self.calibration.to_json(),
            "compactions": [c.to_json() for c in self.compactions],
            "events": [e.to_json() for e in self.events],
        }
        if self.masking is not None:
            d["masking"] = copy.deepcopy(self.masking)
        if self.input is not None:
            d["input"] = self.input.to_json()
        for key, value in self.extra.items():
            d[key] = copy.deepcopy(value)
        return d

    @classmethod
    def from_json(cls, obj: Any) -> State:
        """Build a state from decoded JSON, checking version, schema and consistency (StateError)."""
        return _parse_state(obj, "the state")


def new_state(format: str, input_path: str | os.PathLike[str] | None = None) -> State:
    """A fresh state for a transcript of ``format``: nothing covered, no calibration."""
    info = InputInfo(path=os.fspath(input_path) if input_path is not None else None, format=format)
    return State(fingerprint=Fingerprint(format=format), input=info)


# ------------------------------------------------------------------------------------- schema checks


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    # jsonschema is imported here, not at module level, so `import ctxcompact.cli` stays fast (DESIGN.md).
    from jsonschema import Draft202012Validator

    text = resources.files("ctxcompact").joinpath("schemas/state.schema.json").read_bytes()
    return Draft202012Validator(orjson.loads(text))


def _schema_problem(obj: Any) -> str | None:
    from jsonschema.exceptions import best_match

    err = best_match(_validator().iter_errors(obj))
    if err is None:
        return None
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        # jsonschema's wording with patternProperties ("does not match any of the regexes") hides the
        # point: name the unknown keys, which are usually typos.
        known = err.schema.get("properties", {})
        patterns = [re.compile(p) for p in err.schema.get("patternProperties", {})]
        unknown = [k for k in err.instance if k not in known and not any(p.search(k) for p in patterns)]
        allowed = " (keys starting with 'x-' are free)" if patterns else ""
        return f"{err.json_path}: unknown key {', '.join(map(repr, unknown))}{allowed}"
    return f"{err.json_path}: {err.message}"


def _consistency_problem(obj: dict[str, Any]) -> str | None:
    """Rules the schema cannot say: the fingerprint covers at least the watermark (more when sliding-window
    events reach past it), and offsets are in range."""
    fp = obj["fingerprint"]
    if fp["records"] < obj["watermark"]:
        return (f"$.fingerprint.records: {fp['records']} is less than the watermark {obj['watermark']}")
    if "lines" in fp and fp["lines"] < fp["records"]:
        return f"$.fingerprint.lines: {fp['lines']} lines cannot hold {fp['records']} records"
    if fp["records"] == 0 and fp["bytes"] != 0:
        return "$.fingerprint.bytes: a fingerprint of 0 records must cover 0 bytes"
    for i, (off, n) in enumerate(fp["system_lines"]):
        if off + n > fp["bytes"]:
            return (f"$.fingerprint.system_lines[{i}]: [{off}, {n}] reaches past the covered prefix "
                    f"of {fp['bytes']} bytes")
    for i, ev in enumerate(obj["events"]):
        if ev["end"] < ev["start"]:
            return f"$.events[{i}]: end {ev['end']} is before start {ev['start']}"
    return None


def validate_state(obj: Any) -> str | None:
    """The first problem with a decoded state object (``"<json path>: <what>"``), or None when it is valid.

    A newer ``version`` is reported as such rather than as a schema mismatch."""
    if not isinstance(obj, dict):
        return f"$: expected a JSON object, got {_json_type(obj)}"
    version = _newer_version(obj)
    if version is not None:
        return (f"$.version: written by a newer ctxcompact (state version {version}; "
                f"this one reads version {STATE_VERSION})")
    return _schema_problem(obj) or _consistency_problem(obj)


def _newer_version(obj: Any) -> int | None:
    version = obj.get("version") if isinstance(obj, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > STATE_VERSION:
        return version
    return None


def _json_type(obj: Any) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "a boolean"
    if isinstance(obj, (int, float)):
        return "a number"
    if isinstance(obj, str):
        return "a string"
    if isinstance(obj, list):
        return "an array"
    return type(obj).__name__


def _parse_state(obj: Any, where: str) -> State:
    version = _newer_version(obj)
    if version is not None:
        raise StateError(f"{where} was written by a newer ctxcompact (state version {version}; "
                         f"this one reads version {STATE_VERSION}); "
                         "upgrade ctxcompact or use --reset-state to start over")
    problem = validate_state(obj)
    if problem is not None:
        raise StateError(f"{where} is not a valid ctxcompact state: {problem}; "
                         "fix it or use --reset-state to start over")
    assert isinstance(obj, dict)  # checked by validate_state
    return State(
        version=obj["version"],
        watermark=obj["watermark"],
        fingerprint=Fingerprint.from_json(obj["fingerprint"]),
        summary=Summary.from_json(obj["summary"]) if obj["summary"] is not None else None,
        calibration=Calibration.from_json(obj["calibration"]),
        compactions=[Compaction.from_json(c) for c in obj["compactions"]],
        events=[Event.from_json(e) for e in obj["events"]],
        masking=copy.deepcopy(obj.get("masking")),
        input=InputInfo.from_json(obj["input"]) if "input" in obj else None,
        extra={k: copy.deepcopy(v) for k, v in obj.items() if k.startswith("x-")},
    )


# ------------------------------------------------------------------------------------------ file I/O


def default_state_path(input_path: str | os.PathLike[str]) -> Path:
    """``<input>.ctxstate.json`` beside the input. Stdin has no such place: UsageError."""
    text = os.fspath(input_path)
    if text in ("", "-"):
        raise UsageError("input from stdin has no default state file: give --state PATH or --no-state")
    return Path(text + STATE_SUFFIX)


def load_state(path: str | os.PathLike[str]) -> State | None:
    """The state stored at ``path``, or None when there is no such file.

    A file that cannot be read, is not JSON, does not match the schema or comes from a newer ctxcompact
    raises StateError naming the file and the problem."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read state file {p}: {exc.strerror or exc}") from None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        what = "is empty" if not data.strip() else f"is not valid JSON ({exc})"
        raise StateError(f"state file {p} {what}; fix it or use --reset-state to start over") from None
    return _parse_state(obj, f"state file {p}")


def dump_state(state: State) -> bytes:
    """The file content for ``state``: indented JSON for people, checked against the schema first."""
    obj = state.to_json()
    try:
        data = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise StateError(f"cannot serialize the state: {exc}") from None
    # Check what will actually be read back (orjson writes NaN as null, for example), so a state we write
    # can always be loaded again instead of locking the user out with exit 3 on the next run.
    problem = validate_state(orjson.loads(data))
    if problem is not None:
        raise StateError(f"refusing to write an invalid state: {problem}")
    return data + b"\n"


def save_state(path: str | os.PathLike[str], state: State) -> None:
    """Write ``state`` to ``path`` atomically (a crash leaves the old file or the new one, never half)."""
    data = dump_state(state)
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise StateError(f"cannot write state file {os.fspath(path)}: {exc.strerror or exc}") from None


def reset_state(path: str | os.PathLike[str]) -> bool:
    """Delete the state file; True when there was one. The lock file is left alone (another run may be
    holding it)."""
    p = Path(path)
    try:
        p.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StateError(f"cannot remove state file {p}: {exc.strerror or exc}") from None
    return True


@contextlib.contextmanager
def state_lock(path: str | os.PathLike[str], timeout: float = 10.0) -> Iterator[None]:
    """Hold ``<state>.lock`` for the duration of a read-modify-write of the state.

    Waits up to ``timeout`` seconds (0: try once), then raises StateError. The lock is advisory and
    released when the process ends, even by a crash, so a stale lock file never blocks later runs."""
    from filelock import FileLock, Timeout

    lock_path = os.fspath(path) + ".lock"
    lock = FileLock(lock_path, timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise StateError(f"state file {os.fspath(path)} is locked by another ctxcompact run "
                         f"(waited {timeout:g} s for {lock_path})") from None
    except OSError as exc:
        raise StateError(f"cannot lock state file {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------- fingerprint


def _read_chunks(source: Source, nbytes: int, chunk_size: int) -> Iterator[bytes]:
    """Up to ``nbytes`` bytes of ``source`` in chunks (fewer if it is shorter)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)[:nbytes]
        for i in range(0, len(view), chunk_size):
            yield bytes(view[i:i + chunk_size])
        return
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _read_chunks(f, nbytes, chunk_size)
        return
    left = nbytes
    while left > 0:
        chunk = source.read(min(chunk_size, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _hash_prefix(source: Source, nbytes: int, chunk_size: int = _CHUNK) -> tuple[str, int]:
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    h = hashlib.sha256()
    seen = 0
    for chunk in _read_chunks(source, nbytes, chunk_size):
        h.update(chunk)
        seen += len(chunk)
    return h.hexdigest(), seen


def prefix_fingerprint(path_or_stream: Source, nbytes: int, *, chunk_size: int = _CHUNK) -> str:
    """SHA-256 (hex) of the first ``nbytes`` bytes of a file, an open binary stream (read from its current
    position) or a bytes object, streamed in chunks so large transcripts are not held in memory.

    StateError when the input has fewer than ``nbytes`` bytes: a hash of less than was asked for would
    silently compare unequal (or, worse, equal to the hash of a shorter prefix)."""
    digest, seen = _hash_prefix(path_or_stream, nbytes, chunk_size)
    if seen < nbytes:
        raise StateError(f"the input has only {seen} bytes, fewer than the {nbytes} to fingerprint")
    return digest


def make_fingerprint(source: Source, *, records: int, nbytes: int, format: str,
                     system_lines: Iterable[tuple[int, int]] = (),
                     tokens: TokenCache | None = None) -> Fingerprint:
    """The fingerprint of the first ``records`` records, which are the first ``nbytes`` bytes of
    ``source`` (the input as read: a path, bytes or a stream at its start)."""
    return Fingerprint(records=records, nbytes=nbytes, sha256=prefix_fingerprint(source, nbytes),
                       format=format, tokens=tokens, system_lines=[(int(o), int(n)) for o, n in system_lines])


def check_fingerprint(state: State, input_path_or_bytes: Source, *, format: str | None = None,
                      state_path: str | os.PathLike[str] | None = None) -> None:
    """StateError unless the input still starts with the prefix the state covers.

    An input that only grew passes; one that is shorter than the covered prefix, or whose prefix bytes
    changed, does not (exit 3). ``format``, when given, must match the fingerprint's format too."""
    fp = state.fingerprint
    who = f"the state {os.fspath(state_path)}" if state_path is not None else "the state"
    if fp.nbytes == 0 and fp.records == 0:
        return  # nothing covered yet: any transcript fits
    prefix = f"{who} does not belong to this transcript"
    fix = "use --reset-state to start over"
    if format is not None and fp.format and format != fp.format:
        raise StateError(f"{prefix}: it was made for a {fp.format} transcript, this one is {format}; {fix}")
    try:
        digest, seen = _hash_prefix(input_path_or_bytes, fp.nbytes)
    except OSError as exc:
        name = os.fspath(input_path_or_bytes) if isinstance(input_path_or_bytes, (str, os.PathLike)) else "-"
        raise InputError(f"cannot read input {name}: {exc.strerror or exc}") from None
    if seen < fp.nbytes:
        raise StateError(f"{prefix}: it covers the first {fp.records} records ({fp.nbytes} bytes) but the "
                         f"input has only {seen} bytes; {fix}")
    if digest != fp.sha256:
        raise StateError(f"{prefix}: the first {fp.records} records changed; {fix}")


# ----------------------------------------------------------------------------------------- calibration


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} must be a whole number >= 0, got {value!r}")
    return value


def _clamp_factor(real: int, estimate: int) -> float | None:
    if estimate <= 0:
        return None  # no meaningful ratio against an empty estimate
    return min(MAX_FACTOR, max(MIN_FACTOR, real / estimate))


def record_real_tokens(state: State, prompt_tokens: int) -> Calibration:
    """Store the prompt tokens the provider reported for the last request (``ctxcompact calibrate``).

    When the estimate of that request is known the correction factor is measured now (§5:
    ``clamp(real / last_estimate, 1, 5)``) so it survives the next :func:`record_estimate`."""
    real = _check_count("prompt tokens", prompt_tokens)
    cal = state.calibration
    cal.real = real
    if cal.last_estimate is not None:
        factor = _clamp_factor(real, cal.last_estimate)
        if factor is not None:
            cal.factor = factor
    cal.updated_at = utc_now()
    return cal


def record_estimate(state: State, estimate: int, estimator: str) -> Calibration:
    """Store our estimate of the request about to be sent (the written output), made by ``estimator``
    (``"heuristic"`` or ``"tiktoken:<encoding>"``).

    ``real`` is cleared: it measured the previous request, and pairing it with this new estimate would give
    a wrong factor (too small once the transcript grew). The measured ``factor`` is kept as the best guess
    until the provider reports again, unless the estimator changed (a factor only holds for its estimator).
    """
    value = _check_count("estimate", estimate)
    cal = state.calibration
    if estimator != cal.estimator:
        cal.factor = None
    cal.real = None
    cal.last_estimate = value
    cal.estimator = estimator
    cal.updated_at = utc_now()
    return cal


def reset_calibration(state: State) -> Calibration:
    """Forget all calibration. Done after a compaction (§5): the factor measured on the large pre-compaction
    request must not be applied to the small compacted one, or every run would compact again."""
    state.calibration = Calibration(updated_at=utc_now())
    return state.calibration


# ---------------------------------------------------------------------------------------- compactions


def add_compaction(state: State, *, strategy: str, tokens_before: int, tokens_after: int,
                   records_covered: int, watermark: int, summarizer: str | None, fallback: bool = False,
                   duration_s: float = 0.0, tier: str | None = None, time: str | None = None) -> Compaction:
    """Append one entry to the compaction history and return it."""
    if strategy not in _STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    entry = Compaction(time=time or utc_now(), strategy=strategy, tokens_before=tokens_before,
                       tokens_after=tokens_after, records_covered=records_covered, watermark=watermark,
                       summarizer=summarizer, fallback=fallback, duration_s=float(duration_s), tier=tier)
    state.compactions.append(entry)
    return entry


def set_watermark(state: State, fingerprint: Fingerprint, summary: Summary | None) -> None:
    """Move the watermark to ``fingerprint.records`` with the summary that now covers those records.

    Setting all three together keeps the invariant ``watermark == fingerprint.records`` that loading checks.
    """
    state.watermark = fingerprint.records
    state.fingerprint = fingerprint
    state.summary = summary
