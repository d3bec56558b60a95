"""The message-list API on Gemini lists (google-genai ``types.Content`` objects and their dict dumps):
the real ADK logs round-trip through compact, the result has the shape given (unchanged messages are the
caller's own objects, new ones the SDK's class), thought signatures survive, and observe counts what Gemini
bills for the prompt (``prompt_token_count``, cached content included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import ctxcompact
from ctxcompact.errors import InputError, UsageError

types = pytest.importorskip("google.genai.types", reason="google-genai (the adk extra) is not installed")

DATA = Path(__file__).parent / "data" / "genai"
RULE = "Rule: never push to main; always run the tests before committing."


def _real_contents() -> list[Any]:
    """The Contents of the real ADK events (tests/data/genai/SOURCES.md), as the SDK's objects."""
    out = []
    for name in ("adk-docs-run.jsonl", "adk-docs-run-sse.jsonl"):
        for line in (DATA / name).read_bytes().splitlines():
            out.append(types.Content.model_validate(orjson.loads(line)["content"]))
    return out


def _long(turns: int, sig: bytes = b"\x01\xfe\xff signature") -> list[Any]:
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=RULE + " Start with m0.")])]
    for t in range(turns):
        contents.append(types.Content(role="model", parts=[
            types.Part(text=f"I should read m{t}.", thought=True, thought_signature=sig),
            types.Part(function_call=types.FunctionCall(id=f"c{t}", name="read_file",
                                                        args={"path": f"m{t}"}))]))
        contents.append(types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            id=f"c{t}", name="read_file", response={"result": f"def f{t}(x):\n    return x\n" * 60}))]))
        contents.append(types.Content(role="model", parts=[types.Part(text=f"m{t} returns its input.")]))
        contents.append(types.Content(role="user", parts=[types.Part(text=f"Now explain m{t + 1}.")]))
    return contents


def _text(messages: list[Any]) -> str:
    return orjson.dumps([m if isinstance(m, dict) else m.model_dump(mode="json") for m in messages]).decode()


def test_real_adk_contents_come_back_as_the_same_objects() -> None:
    contents = _real_contents()
    assert len(contents) == 6
    r = ctxcompact.compact(contents, window=100_000)  # format detected
    assert r.format == "genai" and not r.compacted
    assert all(a is b for a, b in zip(r.messages, contents, strict=True)) and r.kept == 6
    dumps = [c.model_dump(mode="json", exclude_none=True) for c in contents]
    r2 = ctxcompact.compact(dumps, window=100_000, format="gemini")
    assert all(a is b for a, b in zip(r2.messages, dumps, strict=True))
    assert r2.tokens_before == r.tokens_before


def test_real_adk_contents_compacted_keep_the_sdk_class() -> None:
    contents = _real_contents() * 40  # the real calls and responses, many times over
    contents.append(types.Content(role="user", parts=[types.Part(text="And the time in Paris?")]))
    r = ctxcompact.compact(contents, window=3_000, format="gemini")
    assert r.compacted and r.tokens_after < r.tokens_before
    assert all(isinstance(m, types.Content) for m in r.messages)
    assert "And the time in Paris?" in _text(r.messages)
    ids = {id(c) for c in contents}
    new = [m for m in r.messages if id(m) not in ids]
    assert new and all(m.parts and m.role in ("user", "model") for m in new)
    assert len(r.messages) - len(new) == r.kept


def test_content_objects_compacted_in_a_session() -> None:
    session = ctxcompact.Session()
    cur = _long(3)
    compactions = 0
    for t in range(3, 60):
        r = ctxcompact.compact(cur, window=4_000, session=session, format="gemini")
        assert r.tokens_after <= 4_000
        assert all(isinstance(m, types.Content) for m in r.messages)
        if r.compacted:
            compactions += 1
            body = _text(r.messages)
            assert "never push to main" in body and f"explain m{t}" in body
        # the caller replaces its list with the result and the model's next turn is appended
        cur = [*r.messages, *_long(t + 1)[-4:]]
        if compactions == 3:
            break
    assert compactions == 3


def test_thought_signatures_survive_a_kept_and_a_rebuilt_message() -> None:
    sig = b"\x00\xff binary \xfe"
    contents = _long(2, sig)
    r = ctxcompact.compact(contents, window=100_000, format="gemini")
    assert r.messages[1] is contents[1] and r.messages[1].parts[0].thought_signature == sig
    # a python-mode dump holds the signature as bytes: it is read (URL-safe base64, as the SDK's JSON)
    dumps = [c.model_dump(exclude_none=True) for c in contents]
    assert isinstance(dumps[1]["parts"][0]["thought_signature"], bytes)
    r2 = ctxcompact.compact(dumps, window=100_000, format="gemini")
    assert r2.messages[1] is dumps[1]
    # a message the pipeline writes anew is rebuilt by the SDK class, the signature decoded again
    rebuilt = types.Content.model_validate(orjson.loads(orjson.dumps(contents[1].model_dump(mode="json"))))
    assert rebuilt.parts[0].thought_signature == sig


def test_parallel_responses_merged_by_the_cleaner_come_back_as_content() -> None:
    calls = types.Content(role="model", parts=[
        types.Part(function_call=types.FunctionCall(id="a", name="ls", args={})),
        types.Part(function_call=types.FunctionCall(id="b", name="ls", args={}))])
    ra = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id="a", name="ls", response={"out": "x"}))])
    rb = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id="b", name="ls", response={"out": "y"}))])
    msgs = [types.Content(role="user", parts=[types.Part(text="list")]), calls, ra, rb]
    r = ctxcompact.compact(msgs, window=100_000, format="gemini")
    assert all(isinstance(m, types.Content) for m in r.messages)
    answered = {p.function_response.id for m in r.messages for p in m.parts or [] if p.function_response}
    assert answered == {"a", "b"}
    assert r.messages[0] is msgs[0] and r.messages[1] is calls


def test_empty_and_one_content() -> None:
    assert ctxcompact.compact([], window=1_000, format="gemini").messages == []
    one = [types.Content(role="user", parts=[types.Part(text="héllo ✓")])]
    r = ctxcompact.compact(one, window=1_000)
    assert r.messages[0] is one[0] and r.format == "genai"


def test_a_content_with_a_bad_role_names_the_message() -> None:
    msgs = [types.Content(role="user", parts=[types.Part(text="a")]),
            types.Content(role="robot", parts=[types.Part(text="b")])]
    with pytest.raises(InputError, match=r"messages\[N-1\]") as exc:
        ctxcompact.compact(msgs, window=1_000, format="gemini")
    assert "line 2" in str(exc.value) and "robot" in str(exc.value)


# ------------------------------------------------------------------------------------------- observe


def test_observe_reads_gemini_usage_metadata_object_and_dicts() -> None:
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=9_000, cached_content_token_count=8_000, tool_use_prompt_token_count=300,
        candidates_token_count=50, thoughts_token_count=70, total_token_count=9_420)
    response = types.GenerateContentResponse(usage_metadata=usage)
    camel = {"usageMetadata": {"promptTokenCount": 9_000, "cachedContentTokenCount": 8_000,
                               "toolUsePromptTokenCount": 300}}
    for given in (usage, response, usage.model_dump(), camel):
        s = ctxcompact.Session()
        ctxcompact.compact(_long(1), window=50_000, session=s, format="gemini")
        billed = s.observe(given)
        # the prompt is prompt_token_count: the cached content is part of it (not added twice), the
        # tool-use prompt is what Gemini's own tools read in that turn, not part of the request sent
        assert billed.tokens == 9_000 and "prompt" in billed.source.lower()
        st = s.state
        assert st is not None and st.calibration.points
        r = ctxcompact.compact(_long(1), window=50_000, session=s, format="gemini")
        assert r.tokens_before >= 9_000 * 0.9  # the next call is calibrated by what Gemini counted


def test_observe_refuses_a_usage_without_a_prompt_count() -> None:
    s = ctxcompact.Session()
    ctxcompact.compact(_long(1), window=50_000, session=s, format="gemini")
    with pytest.raises(UsageError, match="prompt_token_count"):
        s.observe(types.GenerateContentResponseUsageMetadata(candidates_token_count=5))


def test_a_list_of_adk_events_gets_its_summary_as_a_dict_not_an_empty_event() -> None:
    """The SDK class is used only when it holds the whole new message: a Content-shaped summary in a list of
    ADK Event objects stays a dict (Event would take it silently as an empty event)."""
    event_cls = pytest.importorskip("google.adk.events.event", reason="google-adk not installed").Event
    events = []
    for k in range(40):
        for line in (DATA / "adk-docs-run.jsonl").read_bytes().splitlines():
            e = event_cls.model_validate(orjson.loads(line))
            events.append(e.model_copy(update={"id": f"{e.id}-{k}", "timestamp": e.timestamp + 100 * k}))
    r = ctxcompact.compact(events, window=2_000)
    assert r.compacted and r.format == "genai"
    new = [m for m in r.messages if not any(m is e for e in events)]
    assert new and all(isinstance(m, dict) and m.get("parts") for m in new)
    assert "ctxcompact summary" in _text(new)


def test_new_messages_take_the_sdk_class_by_the_format_entry_s_trait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK class of new messages is the entry's trait (``REBUILDS_SDK_OBJECTS``), not the format's name:
    without it the summary comes back as a dict."""
    import dataclasses

    from ctxcompact import plugins

    contents = _long(12)
    r = ctxcompact.compact(contents, window=3_000, format="gemini")
    assert r.compacted and all(isinstance(m, types.Content) for m in r.messages)
    entries = plugins.FORMATS._builtins
    monkeypatch.setitem(entries, "genai", dataclasses.replace(entries["genai"], traits=frozenset()))
    r = ctxcompact.compact(contents, window=3_000, format="gemini")
    assert r.compacted and any(isinstance(m, dict) for m in r.messages)
