"""The sidecar state (docs/concepts/state.md#the-state-file): round trip, schema, versions, corruption, lock,
fingerprint, calibration."""

from __future__ import annotations

import hashlib
import io
import math
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.errors import ExitCode, InputError, OutputError, StateError, UsageError
from ctxcompact.state import (
    EMPTY_SHA256,
    Calibration,
    Compaction,
    Fingerprint,
    HashedFile,
    InputInfo,
    State,
    Summary,
    TokenCache,
    add_compaction,
    check_fingerprint,
    default_state_path,
    dump_state,
    load_state,
    make_fingerprint,
    new_state,
    parse_state,
    prefix_fingerprint,
    record_estimate,
    record_real_tokens,
    reset_calibration,
    reset_state,
    save_state,
    set_watermark,
    state_lock,
    utc_now,
    validate_state,
)
from ctxcompact.strategies.masking_state import MaskedResult, Masking
from ctxcompact.strategies.sliding_window_state import Event, WindowEvents
from ctxcompact.strategies.threshold import summary_from_result
from ctxcompact.summarizers.base import SummaryResult

SCHEMA_PATH = Path(__file__).resolve().parent.parent.parent / "ctxcompact" / "schemas" / "state.schema.json"
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

TRANSCRIPT = (
    b'{"role":"system","content":"You are helpful."}\n'
    b'{"role":"user","content":"Fix the bug in parser.py \xc3\xa9"}\n'
    b'{"role":"assistant","content":"Done."}\n'
)
LINES = TRANSCRIPT.splitlines(keepends=True)


def full_state() -> State:
    """A state with every field set, including optional ones, unicode and x- keys."""
    prefix = b"".join(LINES[:2])
    return State(
        watermark=2,
        fingerprint=Fingerprint(records=2, nbytes=len(prefix), sha256=hashlib.sha256(prefix).hexdigest(),
                                format="openai",
                                tokens=TokenCache(heuristic=21, exact=17, encoding="o200k_base"),
                                system_lines=[(0, len(LINES[0]) - 1)], lines=2),
        summary=Summary(text="## Goals\nFix the parser ✓ 日本", summarizer="anthropic", model="claude-x",
                        fallback=True, fallback_reason="timeout after 60 s",
                        created_at="2025-01-02T03:04:05.678Z",
                        records_covered=2, latest_request="Fix the bug in parser.py é",
                        facts={"files": [{"path": "parser.py", "tools": ["Edit"]}],
                               "errors": [{"text": "E1", "resolved": False}]},
                        input_tokens=1200, output_tokens=300, duration_s=1.25,
                        continuation="[compacted] continue", truncated=True),
        calibration=Calibration(real=48213, last_estimate=20000, estimator="tiktoken:o200k_base",
                                factor=2.41065, updated_at="2025-01-02T03:04:06Z"),
        compactions=[
            Compaction(time="2025-01-02T03:04:05.000Z", strategy="threshold", tokens_before=190000,
                       tokens_after=3000, records_covered=2, watermark=2, summarizer="extractive",
                       fallback=False, duration_s=0.5),
            Compaction(time="2025-01-02T04:00:00Z", strategy="mask", tokens_before=9000, tokens_after=5000,
                       records_covered=0, watermark=2, summarizer=None, fallback=False, duration_s=0.0,
                       tier="mask"),
        ],
        sections={"events": WindowEvents([
            Event(start=0, end=2, invocations=5, records=2, original_tokens=4000, compacted_tokens=400,
                  ratio=0.1, summary="sliding summary", summarizer="extractive", fallback=False,
                  created_at="2025-01-02T03:04:05Z", start_timestamp=1735787045.5,
                  end_timestamp="2025-01-02T03:04:05Z", model="m"),
            Event(start=2, end=3, invocations=1, records=1, original_tokens=10, compacted_tokens=10,
                  ratio=1.0, summary="s", summarizer="openai", created_at="2025-01-02T03:04:05Z"),
        ]), "masking": Masking(results=[MaskedResult(call_id="call_1", tool="bash", index=1,
                                              placeholder="[output of bash cleared: 12,000 chars]",
                                              original_tokens=3000)],
                        extra={"protected_tokens": 40000})},
        input=InputInfo(path="/tmp/session.jsonl", format="openai"),
        extra={"x-note": {"by": "test", "list": [1, 2.5, None]}},
    )


# ------------------------------------------------------------------------------------------ round trip


def test_full_state_round_trips_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.ctxstate.json"
    state = full_state()
    save_state(path, state)
    loaded = load_state(path)
    assert loaded == state
    # saving what was loaded gives the same bytes: nothing is lost or reordered
    save_state(tmp_path / "again.json", loaded)
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_json_round_trip_without_file() -> None:
    state = full_state()
    assert parse_state(state.to_json()) == state
    assert parse_state(orjson.loads(orjson.dumps(state.to_json()))) == state


def test_saved_file_is_indented_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_state(path, new_state("anthropic", "t.jsonl"))
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "version": 2,\n  "watermark": 0,')
    assert text.endswith("}\n")


def test_new_state_covers_nothing() -> None:
    s = new_state("codex", Path("a/b.jsonl"))
    assert s.version == 2 and s.watermark == 0 and s.summary is None
    assert s.fingerprint == Fingerprint(records=0, nbytes=0, sha256=EMPTY_SHA256, format="codex")
    assert hashlib.sha256(b"").hexdigest() == EMPTY_SHA256
    assert s.input == InputInfo(path=str(Path("a/b.jsonl")), format="codex")
    assert validate_state(s.to_json()) is None


# keys the fact store names have typed values in the schema; any other key is carried as it is
_FACT_KEYS = set(orjson.loads((Path(__file__).resolve().parents[2] / "ctxcompact" / "schemas" /
                               "state.schema.json").read_bytes())["$defs"]["facts"]["properties"])


@settings(max_examples=30, deadline=None)
@given(text=st.text(), latest=st.none() | st.text(),
       facts=st.dictionaries(st.text().filter(lambda k: k not in _FACT_KEYS),
                             st.text() | st.integers(min_value=-(2**63), max_value=2**64 - 1)),
       factor=st.none() | st.floats(min_value=1.0, max_value=5.0))
def test_round_trip_any_text(text: str, latest: str | None, facts: dict[str, Any],
                             factor: float | None) -> None:
    s = new_state("openai")
    s.summary = Summary(text=text, summarizer="extractive", latest_request=latest, facts=facts)
    s.calibration.factor = factor
    assert parse_state(orjson.loads(dump_state(s))) == s


def _schema_keys_walk(obj: Any, schema: dict[str, Any], root: dict[str, Any], where: str) -> list[str]:
    """Keys in ``obj`` that ``schema`` does not name (resolving local $ref / oneOf), with their paths."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return _schema_keys_walk(obj, root["$defs"][name], root, where)
    if "oneOf" in schema:
        for alt in schema["oneOf"]:
            if alt.get("type") == "null" and obj is None:
                return []
            if alt.get("type") != "null":
                return _schema_keys_walk(obj, alt, root, where)
    bad: list[str] = []
    if isinstance(obj, dict) and "properties" in schema:  # objects without properties are free (facts)
        props = schema["properties"]
        for k, v in obj.items():
            if k in props:
                bad += _schema_keys_walk(v, props[k], root, f"{where}.{k}")
            elif k.startswith("x-") and where == "$":
                continue
            elif schema.get("additionalProperties", True) is False:
                bad.append(f"{where}.{k}")
    elif isinstance(obj, list) and "items" in schema:
        for i, v in enumerate(obj):
            bad += _schema_keys_walk(v, schema["items"], root, f"{where}[{i}]")
    return bad


def test_saved_state_holds_only_schema_keys(tmp_path: Path) -> None:
    """No stray data (a secret, an SDK object's fields) can ride along: every key is one the schema names."""
    schema = orjson.loads(SCHEMA_PATH.read_bytes())
    path = tmp_path / "s.json"
    save_state(path, full_state())
    obj = orjson.loads(path.read_bytes())
    assert _schema_keys_walk(obj, schema, schema, "$") == []
    assert set(obj) - {"x-note"} <= set(schema["properties"])
    # and the walker does catch an unknown key
    obj["calibration"]["api_key"] = "sk-secret"
    assert _schema_keys_walk(obj, schema, schema, "$") == ["$.calibration.api_key"]


def test_schema_closes_every_object_but_masking() -> None:
    schema = orjson.loads(SCHEMA_PATH.read_bytes())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False and schema["patternProperties"] == {"^x-": {}}
    for name in ("fingerprint", "summary", "calibration", "compaction", "event"):
        assert schema["$defs"][name]["additionalProperties"] is False, name


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(orjson.loads(SCHEMA_PATH.read_bytes()))


# ----------------------------------------------------------------------------------- rejecting input


def _write(path: Path, obj: Any) -> Path:
    path.write_bytes(orjson.dumps(obj))
    return path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.__setitem__("watermark", "2"), r"\$\.watermark: '2' is not of type 'integer'"),
        (lambda d: d["calibration"].__setitem__("real", 1.5), r"\$\.calibration\.real"),
        (lambda d: d["calibration"].__setitem__("factor", 7.0), r"\$\.calibration\.factor"),
        (lambda d: d["calibration"].__setitem__("estimator", "guess"), r"\$\.calibration\.estimator"),
        (lambda d: d["fingerprint"].__setitem__("sha256", "abc"), r"\$\.fingerprint\.sha256"),
        (lambda d: d["compactions"][0].__setitem__("strategy", "Magic!"), r"\$\.compactions\[0\]\.strategy"),
        (lambda d: d["summary"].__setitem__("fallback", "yes"), r"\$\.summary\.fallback"),
        (lambda d: d["summary"].__setitem__("created_at", "2025-01-02 03:04:05"), r"\$\.summary\.created_at"),
        (lambda d: d.__delitem__("events"), r"'events' is a required property"),
        (lambda d: d.__setitem__("watermrk", 3), r"unknown key 'watermrk'"),
        (lambda d: d["fingerprint"].__setitem__("extra", 1), r"\$\.fingerprint: unknown key 'extra'"),
        (lambda d: d.__setitem__("version", 0), r"\$\.version"),
        (lambda d: d.__setitem__("version", True), r"\$\.version"),
        (lambda d: d.__setitem__("watermark", 3), r"2 is less than the watermark 3"),
        (lambda d: d["fingerprint"].__setitem__("system_lines", [[10, 200]]), r"past the covered prefix"),
        (lambda d: d["events"][0].__setitem__("end", -1), r"\$\.events\[0\]\.end"),
        (lambda d: d["events"][1].update(start=5, end=4), r"end 4 is before start 5"),
        (lambda d: d["fingerprint"].__setitem__("lines", 1), r"1 lines cannot hold 2 records"),
    ],
)
def test_load_rejects_invalid_state(tmp_path: Path, mutate: Any, expected: str) -> None:
    obj = full_state().to_json()
    mutate(obj)
    path = _write(tmp_path / "bad.ctxstate.json", obj)
    with pytest.raises(StateError) as exc:
        load_state(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert re.search(expected, msg), msg
    assert "--reset-state" in msg
    assert exc.value.exit_code == ExitCode.STATE


def test_x_keys_are_allowed_and_kept(tmp_path: Path) -> None:
    obj = new_state("openai").to_json()
    obj["x-owner"] = {"team": "infra"}
    loaded = load_state(_write(tmp_path / "s.json", obj))
    assert loaded is not None and loaded.extra == {"x-owner": {"team": "infra"}}
    save_state(tmp_path / "s.json", loaded)
    assert orjson.loads((tmp_path / "s.json").read_bytes())["x-owner"] == {"team": "infra"}


def test_newer_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    obj = new_state("openai").to_json()
    obj["version"] = 3
    obj["something_new"] = {"a": 1}  # a newer file may have keys we do not know: report the version, not them
    path = _write(tmp_path / "future.json", obj)
    newer = r"written by a newer ctxcompact \(state version 3; this one reads version 2\)"
    with pytest.raises(StateError, match=newer) as exc:
        load_state(path)
    assert str(path) in str(exc.value)


@pytest.mark.parametrize(("content", "what"), [
    (b'{"version": 1, "watermark": ', "is not valid JSON"),
    (b"", "is empty"),
    (b"  \n", "is empty"),
    (b"\xff\xfe{}", "is not valid JSON"),
    (b"[1, 2]", "expected a JSON object, got an array"),
    (b"null", "expected a JSON object, got null"),
])
def test_corrupt_file_names_the_file(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "corrupt.ctxstate.json"
    path.write_bytes(content)
    with pytest.raises(StateError) as exc:
        load_state(path)
    assert str(path) in str(exc.value)
    assert what in str(exc.value)


def test_missing_file_is_none(tmp_path: Path) -> None:
    assert load_state(tmp_path / "absent.json") is None


def test_unreadable_path_is_state_error(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(StateError, match="cannot read state file"):
        load_state(tmp_path / "dir.json")


def test_save_refuses_what_could_not_be_loaded_back(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b"previous")
    bad = new_state("openai")
    bad.watermark = 5  # fingerprint still covers 0 records
    with pytest.raises(StateError, match="refusing to write an invalid state"):
        save_state(path, bad)
    nan = new_state("openai")
    add_compaction(nan, strategy="threshold", tokens_before=1, tokens_after=1, records_covered=1, watermark=0,
                   summarizer="extractive", duration_s=math.nan)  # orjson writes NaN as null
    with pytest.raises(StateError, match="duration_s"):
        save_state(path, nan)
    assert path.read_bytes() == b"previous"


def test_unserializable_value_is_state_error(tmp_path: Path) -> None:
    s = new_state("openai")
    s.summary = Summary(text="t", summarizer="extractive", facts={"n": 2**70})
    with pytest.raises(StateError, match="cannot serialize the state"):
        save_state(tmp_path / "s.json", s)
    assert not (tmp_path / "s.json").exists()


def test_save_into_missing_directory_is_output_error(tmp_path: Path) -> None:
    # a state that cannot be written is an output problem (exit 6), not a state of another transcript (3)
    with pytest.raises(OutputError, match=r"cannot write the state to .*s\.json") as info:
        save_state(tmp_path / "no" / "s.json", new_state("openai"))
    assert info.value.exit_code == 6


def test_importing_state_does_not_import_jsonschema_or_filelock() -> None:
    code = "import sys, ctxcompact.state; print('jsonschema' in sys.modules, 'filelock' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -------------------------------------------------------------------------------- paths and reset


def test_default_state_path_is_beside_the_input(tmp_path: Path) -> None:
    assert default_state_path(tmp_path / "sess.jsonl") == tmp_path / "sess.jsonl.ctxstate.json"
    assert default_state_path("rel/x.jsonl") == Path("rel/x.jsonl.ctxstate.json")
    with pytest.raises(UsageError, match="--state PATH or --no-state"):
        default_state_path("-")


def test_reset_state_reports_whether_it_existed(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_state(path, new_state("openai"))
    assert reset_state(path) is True
    assert not path.exists()
    assert reset_state(path) is False


# ----------------------------------------------------------------------------------------------- lock

_HOLDER = textwrap.dedent("""
    import sys
    from ctxcompact.state import state_lock
    with state_lock(sys.argv[1], timeout=5):
        print("locked", flush=True)
        sys.stdin.readline()  # hold until the test says so
    print("released", flush=True)
""")

_COUNTER = textwrap.dedent("""
    import sys, time
    from ctxcompact.state import load_state, save_state, state_lock
    path = sys.argv[1]
    for _ in range(50):
        with state_lock(path, timeout=30):
            state = load_state(path)
            n = state.extra["x-counter"]
            time.sleep(0.001)  # widen the read-modify-write window so a missing lock would lose updates
            state.extra["x-counter"] = n + 1
            save_state(path, state)
""")


def test_second_process_times_out_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.ctxstate.json"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        locked = r"state file .*s\.ctxstate\.json is locked by another ctxcompact run"
        with pytest.raises(StateError, match=locked) as exc, state_lock(path, timeout=0.3):
            pass
        assert time.monotonic() - started >= 0.25  # it did wait for the timeout
        assert exc.value.exit_code == ExitCode.STATE
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        with state_lock(path, timeout=5):  # free again once the holder let go
            pass
    finally:
        holder.kill() if holder.poll() is None else None
        holder.wait()


def test_lock_is_released_when_the_holder_dies(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()  # a crash: no release call
    holder.wait()
    with state_lock(path, timeout=5):
        pass


def test_lock_is_released_after_an_error_in_the_body(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with pytest.raises(RuntimeError), state_lock(path, timeout=1):
        raise RuntimeError("x")
    with state_lock(path, timeout=0):
        pass


def test_two_processes_incrementing_under_the_lock_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "counter.ctxstate.json"
    state = new_state("openai")
    state.extra["x-counter"] = 0
    save_state(path, state)
    procs = [subprocess.Popen([sys.executable, "-c", _COUNTER, str(path)], stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    final = load_state(path)
    assert final is not None and final.extra["x-counter"] == 100
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["counter.ctxstate.json", "counter.ctxstate.json.lock"]  # no temp files left behind


# ---------------------------------------------------------------------------------------- fingerprint


def _state_covering(data: bytes, records: int) -> State:
    nbytes = len(b"".join(data.splitlines(keepends=True)[:records]))
    s = new_state("openai")
    set_watermark(s, make_fingerprint(data, records=records, nbytes=nbytes, format="openai"), None)
    return s


def test_prefix_fingerprint_is_sha256_of_the_prefix(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(TRANSCRIPT)
    n = len(LINES[0]) + len(LINES[1])
    want = hashlib.sha256(TRANSCRIPT[:n]).hexdigest()
    assert prefix_fingerprint(TRANSCRIPT, n) == want
    assert prefix_fingerprint(path, n) == want
    assert prefix_fingerprint(str(path), n) == want
    assert prefix_fingerprint(io.BytesIO(TRANSCRIPT), n) == want
    assert prefix_fingerprint(TRANSCRIPT, 0) == EMPTY_SHA256
    with pytest.raises(StateError, match="only 3 bytes"):
        prefix_fingerprint(b"abc", 4)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=200), cut=st.integers(min_value=0, max_value=200),
       chunk=st.integers(min_value=1, max_value=17), flip=st.integers(min_value=0, max_value=199))
def test_the_fingerprint_of_a_file_a_run_hashed(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                                 cut: int, chunk: int, flip: int) -> None:
    """A streamed run's file (state.HashedFile): the fingerprint of all it read is its hash, with no read
    (the file may be gone); of a shorter prefix, one read, which raises when any byte it hashed changed
    (or the file grew shorter) since."""
    path = tmp_path_factory.mktemp("h") / "t.jsonl"
    path.write_bytes(data + b"appended since")
    n = min(cut, len(data))
    hashed = HashedFile(path, len(data), hashlib.sha256(data).digest())
    assert prefix_fingerprint(hashed, n, chunk_size=chunk) == hashlib.sha256(data[:n]).hexdigest()
    assert make_fingerprint(hashed, records=1, nbytes=len(data), format="openai").sha256 == \
        hashlib.sha256(data).hexdigest()
    changed = bytearray(data)
    changed[flip % len(data)] ^= 1
    for now in (bytes(changed), data[:-1]):
        path.write_bytes(now)
        if n < len(data):
            with pytest.raises(InputError, match="changed while it was read"):
                prefix_fingerprint(hashed, n, chunk_size=chunk)
    path.unlink()
    assert prefix_fingerprint(hashed, len(data)) == hashlib.sha256(data).hexdigest()
    with pytest.raises(ValueError):
        prefix_fingerprint(hashed, len(data) + 1)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=200), cut=st.integers(min_value=0, max_value=200),
       chunk=st.integers(min_value=1, max_value=17))
def test_prefix_fingerprint_any_chunking(data: bytes, cut: int, chunk: int) -> None:
    n = min(cut, len(data))
    want = hashlib.sha256(data[:n]).hexdigest()
    assert prefix_fingerprint(data, n, chunk_size=chunk) == want
    assert prefix_fingerprint(io.BytesIO(data), n, chunk_size=chunk) == want


def test_same_prefix_passes(tmp_path: Path) -> None:
    s = _state_covering(TRANSCRIPT, 2)
    check_fingerprint(s, TRANSCRIPT)
    path = tmp_path / "t.jsonl"
    path.write_bytes(TRANSCRIPT)
    check_fingerprint(s, path, format="openai")
    check_fingerprint(s, io.BytesIO(TRANSCRIPT))


def test_input_that_only_grew_passes() -> None:
    s = _state_covering(TRANSCRIPT, 3)
    check_fingerprint(s, TRANSCRIPT + b'{"role":"user","content":"next"}\n' * 100)


def test_change_after_the_prefix_passes() -> None:
    s = _state_covering(TRANSCRIPT, 2)
    check_fingerprint(s, b"".join(LINES[:2]) + b'{"role":"assistant","content":"Rewritten."}\n')


@pytest.mark.parametrize("pos", [0, 5, len(LINES[0]) + 3, len(LINES[0]) + len(LINES[1]) - 1])
def test_a_changed_byte_in_the_prefix_fails(tmp_path: Path, pos: int) -> None:
    s = _state_covering(TRANSCRIPT, 2)
    changed = bytearray(TRANSCRIPT)
    changed[pos] ^= 0x01
    with pytest.raises(StateError) as exc:
        check_fingerprint(s, bytes(changed), state_path=tmp_path / "t.ctxstate.json")
    msg = str(exc.value)
    assert f"the state {tmp_path / 't.ctxstate.json'} does not belong to this transcript" in msg
    assert "the first 2 records changed; use --reset-state to start over" in msg


def test_a_shorter_input_fails() -> None:
    s = _state_covering(TRANSCRIPT, 3)
    short = r"covers the first 3 records \(\d+ bytes\) but the input has only 10 bytes"
    with pytest.raises(StateError, match=short):
        check_fingerprint(s, TRANSCRIPT[:10])
    with pytest.raises(StateError, match="only 0 bytes"):
        check_fingerprint(s, b"")


def test_a_state_covering_nothing_fits_any_input() -> None:
    s = new_state("openai")
    check_fingerprint(s, b"")
    check_fingerprint(s, TRANSCRIPT, format="anthropic")


def test_format_mismatch_fails() -> None:
    s = _state_covering(TRANSCRIPT, 1)
    with pytest.raises(StateError, match="made for a openai transcript, this one is anthropic"):
        check_fingerprint(s, TRANSCRIPT, format="anthropic")


def test_missing_input_file_is_input_error(tmp_path: Path) -> None:
    s = _state_covering(TRANSCRIPT, 1)
    with pytest.raises(InputError, match="cannot read input"):
        check_fingerprint(s, tmp_path / "gone.jsonl")


def test_fingerprint_round_trip_keeps_system_lines_usable(tmp_path: Path) -> None:
    """A later run copies the system records from the offsets alone, without parsing the prefix."""
    nbytes = len(LINES[0]) + len(LINES[1])
    fp = make_fingerprint(TRANSCRIPT, records=2, nbytes=nbytes, format="openai",
                          system_lines=[(0, len(LINES[0]) - 1)], tokens=TokenCache(heuristic=9))
    s = new_state("openai")
    set_watermark(s, fp, Summary(text="sum", summarizer="extractive", records_covered=2))
    save_state(tmp_path / "s.json", s)
    loaded = load_state(tmp_path / "s.json")
    assert loaded is not None and loaded.watermark == 2
    (off, n), = loaded.fingerprint.system_lines
    assert TRANSCRIPT[off:off + n] == b'{"role":"system","content":"You are helpful."}'
    assert loaded.fingerprint.tokens == TokenCache(heuristic=9)


def test_fingerprint_of_a_huge_prefix_streams(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = b'{"role":"tool","content":"' + b"x" * 4000 + b'"}\n'
    data = line * 800  # ~3.2 MB, several 1 MiB chunks
    path.write_bytes(data)
    s = new_state("openai")
    set_watermark(s, make_fingerprint(path, records=700, nbytes=len(line) * 700, format="openai"), None)
    check_fingerprint(s, path)
    with path.open("r+b") as f:
        f.seek(len(line) * 699 + 30)
        f.write(b"y")
    with pytest.raises(StateError, match="first 700 records changed"):
        check_fingerprint(s, path)


# ---------------------------------------------------------------------------------------- calibration


def test_real_after_estimate_measures_the_clamped_factor() -> None:
    s = new_state("openai")
    record_estimate(s, 20000, "heuristic")
    cal = record_real_tokens(s, 60000)
    assert (cal.real, cal.last_estimate, cal.factor) == (60000, 20000, 3.0)
    record_real_tokens(s, 200000)  # 10x: clamped to 5
    assert s.calibration.factor == 5.0
    record_real_tokens(s, 5000)  # 0.25x: floored at 1 (never scale an estimate down)
    assert s.calibration.factor == 1.0
    assert TIME_RE.match(s.calibration.updated_at or "")


def test_real_without_estimate_keeps_factor_unknown() -> None:
    s = new_state("openai")
    record_real_tokens(s, 1234)
    assert (s.calibration.real, s.calibration.factor) == (1234, None)
    record_estimate(s, 0, "heuristic")
    record_real_tokens(s, 50)  # an empty estimate gives no ratio
    assert s.calibration.factor is None


def test_new_estimate_drops_the_stale_real_but_keeps_the_factor() -> None:
    s = new_state("openai")
    record_estimate(s, 100000, "tiktoken:o200k_base")
    record_real_tokens(s, 200000)
    record_estimate(s, 150000, "tiktoken:o200k_base")  # the transcript grew; no report yet
    cal = s.calibration
    assert (cal.real, cal.last_estimate, cal.factor) == (None, 150000, 2.0)
    assert cal.estimator == "tiktoken:o200k_base"


def test_changing_estimator_forgets_the_factor() -> None:
    s = new_state("openai")
    record_estimate(s, 1000, "heuristic")
    record_real_tokens(s, 2500)
    assert s.calibration.factor == 2.5
    record_estimate(s, 1200, "tiktoken:cl100k_base")
    assert s.calibration.factor is None and s.calibration.estimator == "tiktoken:cl100k_base"


def test_reset_calibration_clears_everything() -> None:
    s = new_state("openai")
    record_estimate(s, 1000, "heuristic")
    record_real_tokens(s, 3000)
    reset_calibration(s)
    cal = s.calibration
    assert (cal.real, cal.last_estimate, cal.estimator, cal.factor) == (None, None, None, None)
    assert TIME_RE.match(cal.updated_at or "")


@pytest.mark.parametrize("bad", [-1, True, 1.5, "100", None])
def test_calibration_rejects_non_counts(bad: Any) -> None:
    s = new_state("openai")
    with pytest.raises(UsageError):
        record_real_tokens(s, bad)
    with pytest.raises(UsageError):
        record_estimate(s, bad, "heuristic")
    assert s.calibration == Calibration()


def test_calibrated_state_saves_and_loads(tmp_path: Path) -> None:
    s = new_state("openai")
    record_estimate(s, 3, "heuristic")
    record_real_tokens(s, 10)
    save_state(tmp_path / "s.json", s)
    loaded = load_state(tmp_path / "s.json")
    assert loaded is not None and loaded.calibration.factor == pytest.approx(10 / 3)


# ---------------------------------------------------------------------------------------- compactions


def test_add_compaction_appends_history(tmp_path: Path) -> None:
    s = new_state("openai")
    first = add_compaction(s, strategy="threshold", tokens_before=190000, tokens_after=2500,
                           records_covered=40, watermark=40, summarizer="anthropic", fallback=True,
                           duration_s=3.5)
    add_compaction(s, strategy="threshold", tokens_before=185000, tokens_after=2600, records_covered=30,
                   watermark=70, summarizer="extractive", tier="summary", time="2025-01-01T00:00:00Z")
    assert [c.watermark for c in s.compactions] == [40, 70]
    assert first.fallback is True and TIME_RE.match(first.time)
    assert s.compactions[1].time == "2025-01-01T00:00:00Z" and s.compactions[1].tier == "summary"
    save_state(tmp_path / "s.json", s)
    loaded = load_state(tmp_path / "s.json")
    assert loaded is not None and loaded.compactions == s.compactions
    with pytest.raises(ValueError, match="not a strategy name"):
        add_compaction(s, strategy="Not a name!", tokens_before=0, tokens_after=0, records_covered=0,
                       watermark=0, summarizer=None)


def test_summary_from_result_keeps_how_it_was_made() -> None:
    result = SummaryResult(text="S", summarizer="extractive", model=None, fallback=True,
                           fallback_reason="401 from provider", facts={"files": ["a.py"]}, input_tokens=None,
                           output_tokens=None, duration_s=0.25, truncated=True)
    summary = summary_from_result(result, records_covered=12, latest_request="do it", continuation="go on")
    assert (summary.text, summary.summarizer, summary.fallback, summary.fallback_reason) == (
        "S", "extractive", True, "401 from provider")
    assert (summary.records_covered, summary.latest_request, summary.continuation, summary.truncated) == (
        12, "do it", "go on", True)
    assert summary.facts == {"files": ["a.py"]} and summary.facts is not result.facts
    assert TIME_RE.match(summary.created_at)


def test_utc_now_format() -> None:
    assert TIME_RE.match(utc_now())


def test_fingerprint_may_reach_past_the_watermark(tmp_path: Path) -> None:
    """Sliding-window events fingerprint the records they cover while the watermark (threshold summary)
    stays 0: a fingerprint of more records than the watermark loads, one of fewer does not."""
    s = _state_covering(TRANSCRIPT, 2)
    s.watermark = 0
    path = tmp_path / "s.json"
    save_state(path, s)
    loaded = load_state(path)
    assert loaded is not None and (loaded.watermark, loaded.fingerprint.records) == (0, 2)
    s.watermark = 3
    with pytest.raises(StateError, match="2 is less than the watermark 3"):
        save_state(path, s)
