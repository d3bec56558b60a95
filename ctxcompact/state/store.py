"""Reading, writing and locking the state file: versioned, checked against ``schemas/state.schema.json`` on
every load and save, written atomically, guarded by a lock file."""

from __future__ import annotations

import copy
import functools
import math
import os
import re
from pathlib import Path
from typing import Any

import orjson

from ..atomic import Staged, output_error, stage
from ..errors import StateError, UsageError
from ..formats.registry import FORMATS
from ..paths import STATE_FILE_LIMIT, check_side_files, read_regular
from ..plugins import STRATEGIES
from ..reader import json_type_phrase
from ..schemacheck import conforms
from ..schemacheck import load as load_schema
from .model import (
    CORE_KEYS,
    STATE_VERSION,
    Calibration,
    Fingerprint,
    InputInfo,
    State,
)

STATE_SUFFIX = ".ctxstate.json"


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    # jsonschema is imported here, not at module level, so `import ctxcompact.cli` stays fast (DESIGN.md).
    from jsonschema import Draft202012Validator

    text = (Path(__file__).resolve().parent.parent / "schemas" / "state.schema.json").read_bytes()
    return Draft202012Validator(orjson.loads(text))


def _schema_problem(obj: Any) -> str | None:
    if conforms(load_schema("state.schema.json"), obj):
        # the usual case, decided without jsonschema (docs/measurements/performance.md#a-hooks-call)
        return None
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
    """Rules the schema cannot say of the state's own keys: the fingerprint covers at least the watermark,
    and offsets are in range (a strategy's section: its own, :func:`_section_problem`)."""
    fp = obj["fingerprint"]
    if fp["format"] not in FORMATS:
        return (f"$.fingerprint.format: unknown format {fp['format']!r} "
                f"(known: {', '.join(FORMATS)})")
    if fp["records"] < obj["watermark"]:
        return (f"$.fingerprint.records: {fp['records']} is less than the watermark {obj['watermark']}")
    if obj["watermark"] > 0 and obj.get("summary") is None:
        # without the summary the covered records would silently vanish from the output
        return (f"$.summary: a watermark of {obj['watermark']} needs the summary that covers those records, "
                "and there is none")
    if "lines" in fp and fp["lines"] < fp["records"]:
        return f"$.fingerprint.lines: {fp['lines']} lines cannot hold {fp['records']} records"
    if fp["records"] == 0 and fp["bytes"] != 0:
        return "$.fingerprint.bytes: a fingerprint of 0 records must cover 0 bytes"
    for i, (off, n) in enumerate(fp["system_lines"]):
        if off + n > fp["bytes"]:
            return (f"$.fingerprint.system_lines[{i}]: [{off}, {n}] reaches past the covered prefix "
                    f"of {fp['bytes']} bytes")
    summary = obj.get("summary")
    for i, (off, n) in enumerate(summary.get("attachment_lines", []) if isinstance(summary, dict) else []):
        if off + n > fp["bytes"]:
            return (f"$.summary.attachment_lines[{i}]: [{off}, {n}] reaches past the covered prefix "
                    f"of {fp['bytes']} bytes")
    return None


def _section_problem(obj: dict[str, Any], names: list[str]) -> str | None:
    """The first problem the strategies ``names`` find in their own sections of ``obj`` (each strategy owns
    what its section may hold: ``plugins.Registry.section_problem``)."""
    for name in names:
        k = STRATEGIES.state_key_of(name)
        if k is None or obj.get(k) is None:
            continue
        problem = STRATEGIES.section_problem(name, obj[k])
        if problem is not None:  # (a problem in a part of the section starts with that part's path)
            return f"$.{k}{problem}" if problem.startswith(("[", ".")) else f"$.{k}: {problem}"
    return None


MAX_STATE_DEPTH = 64
"""The deepest nesting a state may have (ctxcompact's own is under 10; an ``x-`` key is free but not
bottomless: what is read must be written back, and orjson writes at most 255 levels)."""

MAX_STATE_NUMBER = 2**53
"""The largest number ctxcompact's own fields hold: every count, offset and token figure is far below it,
every one is exact in a float, and a larger one (``1e19``, ``1e308``) is a hand edit that arithmetic would
overflow. What is free-form (``x-`` keys, the summary's ``facts``) may hold any number that can be written
back: an integer of 64 bits, a finite float."""

_FREE_KEYS = ("facts",)
_FREE_INT = (-(2**63), 2**64 - 1)


def _number_problem(obj: Any) -> str | None:
    """Numbers and nesting a state may hold, checked before the schema (docs/reference/safety.md): nesting up
    to :data:`MAX_STATE_DEPTH`, finite numbers up to :data:`MAX_STATE_NUMBER` in size. A whole number written
    as a float (``120.0``) in a field of ctxcompact's is read as the integer it is (the schema's ``integer``
    accepts it; the code slices and counts with it); a strategy's section is left as written (its strategy
    reads it, and a state read and saved again is written as it was). Iterative: no recursion limit to
    reach. A value's path is made only for a problem (this runs on every state read and written, over every
    string of a summary's facts)."""
    stack: list[tuple[Any, Any, int, bool, bool]] = [(obj, None, 0, False, True)]
    while stack:
        value, where, depth, free, whole = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_STATE_DEPTH:
                return f"{_short(_path(where))}: nested deeper than {MAX_STATE_DEPTH} levels"
            is_dict = isinstance(value, dict)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if isinstance(v, str) or v is None or v is True or v is False:
                    continue  # nothing to check: not kept on the stack
                inner = free or (is_dict and isinstance(k, str) and (k.startswith("x-") or k in _FREE_KEYS))
                own = whole and not (depth == 0 and k not in CORE_KEYS)
                if isinstance(v, float):
                    if not math.isfinite(v) or (not inner and abs(v) > MAX_STATE_NUMBER):
                        return _too_large(_path((where, k, is_dict)), v, inner)
                    if not inner and own and v.is_integer():
                        value[k] = int(v)
                else:
                    stack.append((v, (where, k, is_dict), depth + 1, inner, own))
        elif isinstance(value, int) and not isinstance(value, bool):
            low, high = _FREE_INT if free else (-MAX_STATE_NUMBER, MAX_STATE_NUMBER)
            if not low <= value <= high:
                return _too_large(_path(where), value, free)
    return None


def _path(where: Any) -> str:
    """``$.a[0].b`` of a value, from its (parent, key, in a dict) links (None: the root)."""
    keys: list[str] = []
    while where is not None:
        where, key, in_dict = where
        keys.append(f".{key}" if in_dict else f"[{key}]")
    return "$" + "".join(reversed(keys))


def _too_large(where: str, value: float, free: bool) -> str:
    limit = "a 64-bit integer or a finite float" if free else f"at most {MAX_STATE_NUMBER:,} in size"
    return f"{where}: {value!r} is not a number a state holds ({limit})"


def _short(where: str) -> str:
    return where if len(where) <= 60 else where[:40] + "…"


def validate_state(obj: Any) -> str | None:
    """The first problem with a decoded state object (``"<json path>: <what>"``), or None when it is valid.

    A newer ``version`` is reported as such rather than as a schema mismatch. A whole number written as a
    float is turned into an int in ``obj`` itself (:func:`_number_problem`)."""
    if not isinstance(obj, dict):
        return f"$: expected a JSON object, got {json_type_phrase(obj)}"
    version = _newer_version(obj)
    if version is not None:
        return (f"$.version: written by a newer ctxcompact (state version {version}; "
                f"this one reads version {STATE_VERSION})")
    problem = _number_problem(obj)
    if problem is not None:
        return problem
    own, plugged = _plugged_sections(obj)
    return plugged or _schema_problem(own) or _consistency_problem(own) or \
        _section_problem(own, list(STRATEGIES.builtin_names()))


def _plugged_sections(obj: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The state without the sections of strategies registered at run time (which the schema does not
    know), and the first problem their own ``problem(value)``, if they have one, finds in them."""
    known = load_schema("state.schema.json")["properties"]
    plugged = {STRATEGIES.state_key_of(n): n for n, p in STRATEGIES.plugins() if p is not None}
    keys = [k for k in obj if k not in known and k in plugged]
    if not keys:
        return obj, None
    own = {k: v for k, v in obj.items() if k not in keys}
    return own, _section_problem(obj, [plugged[k] for k in keys])


def _newer_version(obj: Any) -> int | None:
    version = obj.get("version") if isinstance(obj, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > STATE_VERSION:
        return version
    return None


def parse_state(obj: Any, where: str = "the state") -> State:
    """Build a state from decoded JSON, checking version, schema and consistency (StateError)."""
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
    if obj["summary"] is not None or obj["compactions"]:  # (a state no compaction wrote loads neither)
        from .compacted import Compaction, Summary
    return State(
        version=STATE_VERSION,  # an older version is read as it maps onto this one, and saved as this one
        watermark=obj["watermark"],
        fingerprint=Fingerprint.from_json(obj["fingerprint"]),
        summary=Summary.from_json(obj["summary"]) if obj["summary"] is not None else None,
        calibration=Calibration.from_json(obj["calibration"]),
        compactions=[Compaction.from_json(c) for c in obj["compactions"]],
        sections={k: copy.deepcopy(v) for k, v in obj.items()
                  if k not in CORE_KEYS and not k.startswith("x-")},  # each strategy's, read by it on use
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
    data = _read_state_file(p)
    if data is None:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        what = "is empty" if not data.strip() else f"is not valid JSON ({exc})"
        raise StateError(f"state file {p} {what}; fix it or use --reset-state to start over") from None
    return parse_state(obj, f"state file {p}")


def _read_state_file(p: Path) -> bytes | None:
    """The bytes of the state file, None when there is none; a FIFO, a device or a file over
    ``STATE_FILE_LIMIT`` is a StateError before any blocking or unbounded read (docs/reference/safety.md)."""
    try:
        return read_regular(p, f"cannot read state file {p}", STATE_FILE_LIMIT, error=StateError)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read state file {p}: {exc.strerror or exc}") from None


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
    """Write ``state`` to ``path`` atomically (a crash leaves the old file or the new one, never half); a
    full disk or a read-only folder is an OutputError (exit 6) naming the file, which is left as it was."""
    staged = stage_state(path, state)
    try:
        staged.commit()
    except OSError as exc:
        staged.discard()
        raise output_error(exc, "state", path) from None


def stage_state(path: str | os.PathLike[str], state: State) -> Staged:
    """The state written to a temporary file beside ``path``, not yet in place (``atomic.stage``): ``run``
    stages it before it writes the output and renames it after, so neither changes when either fails."""
    return stage(path, dump_state(state), what="state")


def check_is_state(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a ctxcompact state (a JSON object with the state's ``version``, ``watermark``
    and ``fingerprint``: valid or not, old or new), False when there is no file; StateError (exit 3) for
    anything else, so ``state reset`` never deletes a transcript given by a slip of tab completion."""
    p = Path(path)
    check_side_files(p)
    data = _read_state_file(p)
    if data is None:
        return False
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        obj = None
    if not (isinstance(obj, dict) and isinstance(obj.get("version"), int) and "watermark" in obj
            and "fingerprint" in obj):
        raise StateError(f"{p} is not a ctxcompact state file; not removed (delete it yourself if you "
                         "mean to)")
    return True


def reset_state(path: str | os.PathLike[str]) -> bool:
    """Delete the state file; True when there was one. Only a file that is a ctxcompact state is deleted
    (:func:`check_is_state`, exit 3 otherwise). The lock file is left alone (another run may be holding
    it)."""
    p = Path(path)
    if not check_is_state(p):
        return False
    try:
        p.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StateError(f"cannot remove state file {p}: {exc.strerror or exc}") from None
    return True
