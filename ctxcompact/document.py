"""A transcript stored as one JSON document (docs/reference/formats.md#whole-file-json), as the JSONL of its
records: :func:`split_document`, applied by ``source.InputData.load``.

Apart from :mod:`.reader` so that a command that never holds its input (``run`` on the streamed route: a
hook's call) does not make :class:`Document` (a frozen dataclass: ~4 M instructions on Python 3.11,
docs/measurements/performance-log.md, branch start12).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import InputError
from .reader import BOM, encode_json, json_type_phrase


@dataclass(frozen=True, slots=True)
class Document:
    """A transcript stored as one JSON document, as JSONL: its records one per line, in order."""

    lines: bytes
    what: str  # what it was, for messages: "an ADK session export (12 events)"


#: keys under which a whole-file JSON transcript holds its records, and what such a file is
_CONTAINERS = (
    ("events", "an ADK session export", "events"),  # adk web / api_server GET .../sessions/{id}
    ("contents", "a Gemini API request", "contents"),
    ("history", "a Gemini chat history", "contents"),
    ("messages", "a chat request or export", "messages"),
)


_JSON_TEXT = re.compile(rb"[^ \t\r\n]")  # anything but JSON's whitespace


def split_document(data: bytes) -> Document | None:
    """``data`` as JSONL when it is one JSON document holding a transcript, not JSONL
    (docs/reference/formats.md#whole-file-json): an array of records (``[{...}, {...}]``, pretty-printed or
    not), an ADK session export ``{"events": [...]}`` (pretty-printed or not), and spread over several
    lines, a request body ``{"messages": [...]}`` (its top-level ``system`` becomes the first record) or
    ``{"contents": [...]}``, a Gemini chat history ``{"history": [...]}`` (on one line those are fine-tuning
    records, JSONL). None for JSONL (or anything that is not one JSON document: the line reader then says
    what is wrong, line by line).

    A document that is clearly not JSONL but cannot be read as records (a Gemini CLI chat file, an array of
    strings, any other object spread over lines) is an InputError of one line saying what it is."""
    body = data[len(BOM):] if data.startswith(BOM) else data
    text = body.lstrip()
    if text[:1] not in (b"[", b"{"):
        return None
    end = text.find(b"\n")
    if end >= 0 and _JSON_TEXT.search(text, end) is not None:
        # a first line that is a whole value with more after it is JSONL: one document would be a value
        # and nothing else (the parse below fails), decided without reading the whole input
        try:
            orjson.loads(text[:end])
            return None
        except orjson.JSONDecodeError:
            pass
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # JSONL (several values), or broken: the line reader reports it
    lines = body.strip().count(b"\n") + 1
    if isinstance(doc, list):
        if lines == 1 and not all(isinstance(x, dict) for x in doc):
            return None  # one JSONL line that is not an object: the line reader says so, with its number
        return _records(doc, f"a JSON array of {len(doc):,} items", "'.[]'")
    if not isinstance(doc, dict):  # pragma: no cover - starts with [ or {
        return None
    messages = doc.get("messages")
    if isinstance(messages, list) and ("projectHash" in doc or "sessionId" in doc) and any(
            isinstance(m, dict) and m.get("type") in ("user", "gemini") for m in messages):
        raise InputError(f"input: a Gemini CLI chat file ({len(messages):,} messages, one JSON document): "
                         "ctxcompact does not read the Gemini CLI format (its messages are not OpenAI, "
                         "Anthropic or Gemini API messages)")
    for key, what, noun in _CONTAINERS:
        items = doc.get(key)
        if lines == 1 and key != "events":
            # one line of {"messages": …} or {"contents": …} is a fine-tuning record (OpenAI, Vertex AI):
            # a JSONL line whose format says what is wrong with it
            break
        if isinstance(items, list) and all(isinstance(x, dict) for x in items):
            if key == "messages" and isinstance(doc.get("system"), (str, list)):  # an Anthropic request
                items = [{"role": "system", "content": doc["system"]}, *items]
            return _records(items, f"{what} ({len(items):,} {noun})", f"'.{key}[]'")
    if lines == 1:
        return None  # one JSONL line: the format decides what it is
    keys = ", ".join(list(doc)[:6]) + (", …" if len(doc) > 6 else "")
    lists = [k for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    hint = f"jq -c '.{lists[0]}[]' FILE" if lists else "jq -c . FILE"
    raise InputError(f"input: one JSON object over {lines:,} lines (keys: {keys}), not JSONL (one JSON "
                     f"object per line) nor a transcript ctxcompact knows how to unpack; try: {hint}")


def _records(items: list[Any], what: str, path: str) -> Document:
    bad = next((i for i, x in enumerate(items) if not isinstance(x, dict)), None)
    if bad is not None:
        raise InputError(f"input: {what}, but item {bad + 1} is {json_type_phrase(items[bad])}, not a JSON "
                         f"object (a transcript is one object per record; jq -c {path} FILE gives them)")
    return Document(b"".join(encode_json(x) + b"\n" for x in items), what)
