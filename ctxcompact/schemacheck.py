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
from collections.abc import Callable, Mapping
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


Check = Callable[[Any], bool]


def _fails(exc: Exception) -> Check:
    def check(v: Any) -> bool:
        raise exc
    return check


class _Compiler:
    """A schema turned into one closure per node, its keywords' checks in the schema's order (so the first
    failing keyword answers before a later unknown one, as jsonschema's walk would): the walk over the
    schema's keywords is done once per schema instead of once per value (3-4x faster per line,
    which every ``run`` and ``estimate`` pays on every new line). A keyword this checker does not implement
    becomes a check that raises ``_Unsure`` when reached, as the walk does."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def node(self, s: Any) -> Check:
        if s is True:
            return lambda v: True
        if s is False:
            return lambda v: False
        if not isinstance(s, dict):
            return _fails(_Unsure("schema"))
        checks: list[Check] = []
        for key, want in s.items():
            if key in _ANNOTATIONS or key in ("then", "else"):
                continue
            try:
                checks.append(self.keyword(key, want, s))
            except (_Unsure, TypeError, AttributeError, re.error) as exc:
                checks.append(_fails(exc if not isinstance(exc, AttributeError) else TypeError(str(exc))))
        if not checks:
            return lambda v: True
        if len(checks) == 1:
            return checks[0]
        def all_of(v: Any) -> bool:
            for check in checks:  # noqa: SIM110 (a loop: all() over a generator is slower per line)
                if not check(v):
                    return False
            return True
        return all_of

    def keyword(self, key: str, want: Any, s: dict[str, Any]) -> Check:
        node = self.node
        if key == "type":
            if isinstance(want, str):
                return _type_check(want)
            each = [_type_check(t) for t in want]
            return lambda v: any(c(v) for c in each)
        if key == "properties":
            props = [(k, node(sub)) for k, sub in want.items()]

            def properties(v: Any) -> bool:
                if isinstance(v, dict):
                    for k, check in props:
                        if k in v and not check(v[k]):
                            return False
                return True
            return properties
        if key == "required":
            names = frozenset(want)
            return lambda v: not isinstance(v, dict) or v.keys() >= names
        if key == "additionalProperties":
            known = s.get("properties", {})
            patterns = [_regex(p) for p in s.get("patternProperties", {})]
            extra = node(want)

            def additional(v: Any) -> bool:
                if isinstance(v, dict):
                    for k, item in v.items():
                        if k in known or any(p.search(k) for p in patterns):
                            continue
                        if not extra(item):
                            return False
                return True
            return additional
        if key == "patternProperties":
            pats = [(_regex(p), node(sub)) for p, sub in want.items()]

            def pattern_properties(v: Any) -> bool:
                if isinstance(v, dict):
                    for rx, check in pats:
                        for k, item in v.items():
                            if rx.search(k) and not check(item):
                                return False
                return True
            return pattern_properties
        if key == "items":
            start = len(s.get("prefixItems", ()))
            each_item = node(want)
            return lambda v: not isinstance(v, list) or all(each_item(x) for x in v[start:])
        if key == "prefixItems":
            firsts = [node(sub) for sub in want]
            return lambda v: not isinstance(v, list) or all(c(x) for x, c in zip(v, firsts, strict=False))
        if key == "minItems":
            return lambda v: not (isinstance(v, list) and len(v) < want)
        if key == "maxItems":
            return lambda v: not (isinstance(v, list) and len(v) > want)
        if key == "enum":
            options = list(want)
            if all(isinstance(e, str) for e in options):  # a string equals only the same string (_equal)
                strings = frozenset(options)
                return lambda v: isinstance(v, str) and v in strings
            return lambda v: any(_equal(v, e) for e in options)
        if key == "const":
            if isinstance(want, str):
                return lambda v: isinstance(v, str) and v == want
            return lambda v: _equal(v, want)
        if key == "minimum":
            return lambda v: not (_is_number(v) and v < want)
        if key == "maximum":
            return lambda v: not (_is_number(v) and v > want)
        if key == "pattern":
            rx = _regex(want)
            return lambda v: not isinstance(v, str) or rx.search(v) is not None
        if key == "allOf":
            subs = [node(sub) for sub in want]
            return lambda v: all(c(v) for c in subs)
        if key == "anyOf":
            subs = [node(sub) for sub in want]
            return lambda v: any(c(v) for c in subs)
        if key == "oneOf":
            subs = [node(sub) for sub in want]
            return lambda v: sum(1 for c in subs if c(v)) == 1
        if key == "not":
            negated = node(want)
            return lambda v: not negated(v)
        if key == "if":
            cond = node(want)
            then = node(s["then"]) if "then" in s else None
            other = node(s["else"]) if "else" in s else None

            def if_then_else(v: Any) -> bool:
                branch = then if cond(v) else other
                return branch is None or branch(v)
            return if_then_else
        if key == "$ref":
            return self.ref(want)
        raise _Unsure(key)

    def ref(self, ref: str) -> Check:
        """A reference, resolved and compiled when first checked (a schema may refer to itself)."""
        refs = self.refs

        def check(v: Any) -> bool:
            target = refs.get(ref)
            if target is None:
                target = refs[ref] = self.node(_resolve(self.root, ref))
            return target(v)
        return check


def _type_check(t: str) -> Check:
    if t == "string":
        return lambda v: isinstance(v, str)
    if t == "object":
        return lambda v: isinstance(v, dict)
    if t == "array":
        return lambda v: isinstance(v, list)
    if t == "null":
        return lambda v: v is None
    if t in ("integer", "number", "boolean"):
        return lambda v: _is_type(v, t)
    raise _Unsure(t)


_compiled: dict[int, tuple[Any, Check]] = {}


def _check_of(schema: Any) -> Check:
    """The compiled check of ``schema`` (kept with the schema itself, so its id stays its own)."""
    hit = _compiled.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_compiled) > 256:
        _compiled.clear()
    check = _Compiler(schema).node(schema)
    _compiled[id(schema)] = (schema, check)
    return check


def conforms(schema: Any, value: Any) -> bool:
    """True when ``value`` conforms to ``schema`` for certain; False when it does not or this checker cannot
    tell (then ask jsonschema)."""
    try:
        return _check_of(schema)(value)
    except (_Unsure, RecursionError, TypeError, re.error):
        return False
