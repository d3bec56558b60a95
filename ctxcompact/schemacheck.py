"""Whether a JSON value conforms to one of our schemas, without importing jsonschema
(docs/measurements/performance.md#a-hooks-call).

Importing jsonschema and compiling a Draft 2020-12 validator costs about 0.1 s per process, more than a small
run's whole work. Almost every line and every state conforms, so :func:`conforms` answers that question
first, for the keywords our schemas use (``type``, ``properties``, ``required``, ``additionalProperties``,
``patternProperties``, ``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``enum``, ``const``,
``minimum``, ``maximum``, ``pattern``, ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
and ``$ref`` within the document), with jsonschema's own rules (``1`` is not ``true``, ``1 == 1.0``, an
integer may be ``2.0``). Only when it says no (or meets a keyword it does not know) do the callers ask
jsonschema, whose errors are then reported exactly as before. tests/test_fastpaths.py checks every verdict
against jsonschema's on every sample line, state and random mutations of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import orjson

_SCHEMAS = Path(__file__).resolve().parent / "schemas"
_ANNOTATIONS = frozenset({"description", "title", "$schema", "$id", "$defs", "definitions", "$comment",
                          "examples", "default", "deprecated", "readOnly", "writeOnly"})


class _Unsure(Exception):
    """A keyword or reference this checker does not implement: let jsonschema decide."""


@cache
def load(schema_file: str) -> Any:
    """The decoded schema ``schemas/<schema_file>``, read once per process."""
    return orjson.loads((_SCHEMAS / schema_file).read_bytes())


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_TRUE, _FALSE = object(), object()


def _unbool(v: Any) -> Any:
    return _TRUE if v is True else _FALSE if v is False else v


def _equal(a: Any, b: Any) -> bool:
    """jsonschema's ``_utils.equal``: booleans are not numbers, containers compare item by item."""
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(_unbool(a) == _unbool(b))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_type(v: Any, t: str) -> bool:
    if t == "string":
        return isinstance(v, str)
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "integer":
        return _is_number(v) and (isinstance(v, int) or float(v).is_integer())
    if t == "number":
        return _is_number(v)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    raise _Unsure(t)


def _resolve(root: Any, ref: str) -> Any:
    if not ref.startswith("#/"):
        raise _Unsure(ref)
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise _Unsure(ref)
        node = node[part]
    return node


def _valid(v: Any, s: Any, root: Any) -> bool:
    if s is True:
        return True
    if s is False:
        return False
    if not isinstance(s, dict):
        raise _Unsure("schema")
    for key, want in s.items():
        if key in _ANNOTATIONS:
            continue
        if key == "type":
            if isinstance(want, str):
                if not _is_type(v, want):
                    return False
            elif not any(_is_type(v, t) for t in want):
                return False
        elif key == "properties":
            if isinstance(v, dict):
                for k, sub in want.items():
                    if k in v and not _valid(v[k], sub, root):
                        return False
        elif key == "required":
            if isinstance(v, dict) and any(k not in v for k in want):
                return False
        elif key == "additionalProperties":
            if isinstance(v, dict):
                known = s.get("properties", {})
                patterns = [_regex(p) for p in s.get("patternProperties", {})]
                for k, item in v.items():
                    if k in known or any(p.search(k) for p in patterns):
                        continue
                    if not _valid(item, want, root):
                        return False
        elif key == "patternProperties":
            if isinstance(v, dict):
                for p, sub in want.items():
                    rx = _regex(p)
                    for k, item in v.items():
                        if rx.search(k) and not _valid(item, sub, root):
                            return False
        elif key == "items":
            if isinstance(v, list):
                start = len(s.get("prefixItems", ()))
                if not all(_valid(item, want, root) for item in v[start:]):
                    return False
        elif key == "prefixItems":
            if isinstance(v, list) and not all(_valid(x, sub, root) for x, sub in zip(v, want, strict=False)):
                return False
        elif key == "minItems":
            if isinstance(v, list) and len(v) < want:
                return False
        elif key == "maxItems":
            if isinstance(v, list) and len(v) > want:
                return False
        elif key == "enum":
            if not any(_equal(v, e) for e in want):
                return False
        elif key == "const":
            if not _equal(v, want):
                return False
        elif key == "minimum":
            if _is_number(v) and v < want:
                return False
        elif key == "maximum":
            if _is_number(v) and v > want:
                return False
        elif key == "pattern":
            if isinstance(v, str) and not _regex(want).search(v):
                return False
        elif key == "allOf":
            if not all(_valid(v, sub, root) for sub in want):
                return False
        elif key == "anyOf":
            if not any(_valid(v, sub, root) for sub in want):
                return False
        elif key == "oneOf":
            if sum(1 for sub in want if _valid(v, sub, root)) != 1:
                return False
        elif key == "not":
            if _valid(v, want, root):
                return False
        elif key == "if":
            branch = "then" if _valid(v, want, root) else "else"
            if branch in s and not _valid(v, s[branch], root):
                return False
        elif key in ("then", "else"):
            continue  # taken with "if"
        elif key == "$ref":
            if not _valid(v, _resolve(root, want), root):
                return False
        else:
            raise _Unsure(key)
    return True


def conforms(schema: Any, value: Any) -> bool:
    """True when ``value`` conforms to ``schema`` for certain; False when it does not or this checker cannot
    tell (then ask jsonschema)."""
    try:
        return _valid(value, schema, schema)
    except (_Unsure, RecursionError, TypeError, re.error):
        return False
