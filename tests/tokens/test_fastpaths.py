"""The small-input paths of docs/measurements/performance.md#a-hooks-call give exactly what the slow ones
give: the pure-Python token counter (tokens/bpe.py) against tiktoken, and the schema pre-check
(schemacheck.py) against jsonschema."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ctxcompact import schemacheck
from ctxcompact.tokens import bpe, exact

DATA = Path(__file__).parent.parent / "data"
SAMPLES = sorted(p for p in DATA.rglob("*.jsonl") if "/cli/" not in str(p))[:60]


def _lines() -> list[bytes]:
    return [line for p in SAMPLES for line in p.read_bytes().splitlines() if line.strip()]


@pytest.fixture(scope="module", params=exact.ENCODINGS)
def pair(request, tmp_path_factory):
    name = request.param
    import os

    before = os.environ.get("CTXCOMPACT_CACHE_DIR")
    os.environ["CTXCOMPACT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    bpe._counters.clear()
    try:
        counter = bpe.counter(name, exact._SPEC[name][0], exact.EXPECTED_SHA256[name],
                              lambda: exact.parse_ranks(exact._read_ranks_file(name)))
        # the second counter reads the cache file the first one wrote
        bpe._counters.clear()
        cached = bpe.counter(name, exact._SPEC[name][0], exact.EXPECTED_SHA256[name],
                             lambda: pytest.fail("the cached table was not used"))
    finally:
        if before is None:
            del os.environ["CTXCOMPACT_CACHE_DIR"]
        else:
            os.environ["CTXCOMPACT_CACHE_DIR"] = before
        bpe._counters.clear()
    return counter, cached, exact.get_encoding(name)


def test_pure_counts_equal_tiktoken_on_samples(pair):
    counter, cached, enc = pair
    for line in _lines():
        text = line.decode("utf-8", "replace")
        want = len(enc.encode_ordinary(text))
        assert counter.count(text) in (want, None)
        assert cached.count(text) in (want, None)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
       | st.text(alphabet=" \n\t\r'sdtmlvre0123456789aAzZ.,;:!?-_/\\\"éü中文😀\u00a0", max_size=200))
def test_pure_counts_equal_tiktoken_on_random_text(pair, text):
    _, cached, enc = pair
    got = cached.count(text)
    assert got is None or got == len(enc.encode_ordinary(text))


_LONG_SHAPES = {  # the pre-tokens on which a scan-per-merge went quadratic (issue 26 item 9)
    "spaces": "x" + " " * 5000 + "y",
    "newlines": "collecting\n" + "\n" * 5000 + "FAILED",
    "one char": "a" * 5000,
    "digits": "7" * 5000,
    "punctuation": "=-" * 2500,
    "long word": "".join(random.Random(3).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000)),
    "CJK without spaces": "".join(chr(0x4E00 + random.Random(4).randrange(3000)) for _ in range(3000)),
    "tabs and CRs": "\t\r" * 2500,
    "emoji": "😀" * 2000,
}


@pytest.mark.parametrize("shape", sorted(_LONG_SHAPES))
def test_pure_counts_equal_tiktoken_on_long_pre_tokens(pair, shape):
    _, cached, enc = pair
    text = _LONG_SHAPES[shape]
    assert cached.count(text) == len(enc.encode_ordinary(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", " ", "\n", "ab", "=", "é", "中", "\r\n", "7", "😀"]),
                          st.integers(1, 400)), max_size=6))
def test_pure_counts_equal_tiktoken_on_runs(pair, runs):
    _, cached, enc = pair
    text = "".join(s * k for s, k in runs)
    assert cached.count(text) == len(enc.encode_ordinary(text))


def test_unsure_text_is_left_to_tiktoken(pair):
    counter, _, _ = pair
    assert counter.count("a\ud800b") is None  # a lone surrogate
    assert counter.count("\U000e0fff") is None  # unassigned in Python's tables


def test_a_corrupt_or_foreign_cache_is_ignored(tmp_path):
    name = "cl100k_base"
    sha = exact.EXPECTED_SHA256[name]
    ranks = exact.parse_ranks(exact._read_ranks_file(name))
    path = tmp_path / "t.ranks"
    bpe.save_table(path, ranks, sha)
    table = bpe.load_table(path, sha)
    assert table is not None and table.get(b"hello") == ranks[b"hello"] and table.get(b"\xff\xfe\xfd") is None
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    assert bpe.load_table(path, sha) is None  # payload hash
    assert bpe.load_table(tmp_path / "missing", sha) is None
    bpe.save_table(path, ranks, sha)
    assert bpe.load_table(path, exact.EXPECTED_SHA256["o200k_base"]) is None  # another rank file
    path.write_bytes(b"CTXBPE1")
    assert bpe.load_table(path, sha) is None


def _mutate(rnd: random.Random, o):
    if isinstance(o, dict) and o:
        o = dict(o)
        k = rnd.choice(list(o))
        r = rnd.random()
        if r < 0.2:
            del o[k]
        elif r < 0.4:
            o[k] = rnd.choice([None, 1, 1.0, True, "x", [], {}, -1, 2.5])
        elif r < 0.5:
            o[f"zz{rnd.random()}"] = 1
        else:
            o[k] = _mutate(rnd, o[k])
        return o
    if isinstance(o, list) and o:
        o = list(o)
        i = rnd.randrange(len(o))
        if rnd.random() < 0.3:
            del o[i]
        else:
            o[i] = _mutate(rnd, o[i])
        return o
    return rnd.choice([None, 1, 1.0, True, False, "x", "user", "assistant", [], {}, -1, 0, 2.5, "message"])


def _schemas_and_samples() -> tuple[list[str], dict[str, Any], dict[str, Draft202012Validator], list[Any]]:
    """Our schemas by file name, a jsonschema validator of each, and the decoded sample lines."""
    names = sorted(p.name for p in (Path(schemacheck.__file__).parent / "schemas").glob("*.json"))
    schemas = {n: schemacheck.load(n) for n in names}
    validators = {n: Draft202012Validator(s) for n, s in schemas.items()}
    objs = []
    for line in _lines()[:800:2]:  # every other line of the first 800: each sample's shapes, half the time
        try:
            objs.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue  # the broken samples
    return names, schemas, validators, objs


def test_schema_precheck_agrees_with_jsonschema():
    names, schemas, validators, objs = _schemas_and_samples()
    for p in sorted(DATA.rglob("*.state.json"))[:60]:
        try:
            objs.append(orjson.loads(p.read_bytes()))
        except orjson.JSONDecodeError:
            continue  # a crafted broken state
    rnd = random.Random(7)
    for o in objs:
        for m in [o] + [_mutate(rnd, o) for _ in range(4)]:
            for n in names:
                valid = validators[n].is_valid(m)
                if schemacheck.conforms(schemas[n], m):
                    assert valid, (n, m)
                elif m is o:
                    assert not valid, (n, m)  # no valid sample is sent to jsonschema


def test_schema_precheck_equals_jsonschema_on_our_schemas():
    """Every keyword of our schemas is one the pre-check knows, so on them its verdict is jsonschema's, both
    ways (a pre-check that said no to a conforming line would only be slower: this catches that too)."""
    names, schemas, validators, objs = _schemas_and_samples()
    rnd = random.Random(11)
    for o in objs:
        for m in [o] + [_mutate(rnd, o) for _ in range(6)]:
            for n in names:
                assert schemacheck.conforms(schemas[n], m) == validators[n].is_valid(m), (n, m)


# a schema with every keyword the pre-check compiles (and a recursive $ref), for generated values
_EVERY_KEYWORD = {
    "$defs": {
        "node": {"type": ["object", "null"], "properties": {"next": {"$ref": "#/$defs/node"},
                                                           "n": {"type": "integer", "minimum": 0}}},
    },
    "anyOf": [
        {"type": "object", "required": ["kind"],
         "properties": {"kind": {"enum": ["a", "b", 1, None, [1]]}, "node": {"$ref": "#/$defs/node"},
                        "s": {"type": "string", "pattern": "^x+$"}, "c": {"const": {"k": [1, 2.0]}}},
         "patternProperties": {"^p_": {"type": "number", "maximum": 10}},
         "additionalProperties": {"type": ["boolean", "string"]},
         "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
         "then": {"required": ["s"]}, "else": {"not": {"required": ["s"]}}},
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
         "items": {"oneOf": [{"type": "number"}, {"type": "integer", "minimum": 5}]},
         "minItems": 1, "maxItems": 5},
        {"allOf": [{"type": "string"}, {"not": {"const": "no"}}]},
        {"const": True},
    ],
}
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.floats(-3, 12, allow_nan=False)
    | st.sampled_from(["a", "b", "x", "xx", "no", "", "kind", 1.0, 5.0]),
    lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.sampled_from(["kind", "node", "s", "c", "next", "n", "p_1", "p_", "k", "zz"]),
                      inner, max_size=5),
    max_leaves=20,
)
_NUMBERS = st.sampled_from([0, -1, 0.0, 1.5, 2.0, 4, 4.5, 5, 5.0, 6, 9, 10, 10.0, 10.5, True, False, "1",
                           None])
_NODES = st.recursive(st.none() | st.fixed_dictionaries({}, optional={"n": _NUMBERS}),
                      lambda inner: st.fixed_dictionaries({}, optional={"next": inner, "n": _NUMBERS}),
                      max_leaves=4)
# values near the schema's edges (most random values fail its first keywords)
_SHAPED = (
    st.fixed_dictionaries({"kind": st.sampled_from(["a", "b", 1, 1.0, None, [1], [1.0], "c", True])},
                          optional={"s": st.sampled_from(["x", "xx", "", "y", 1]), "node": _NODES,
                                    "c": st.sampled_from([{"k": [1, 2.0]}, {"k": [1, 2]}, {"k": [1, 2.5]},
                                                          {"k": [True, 2]}, {"k": [1]}]),
                                    "p_1": _NUMBERS, "zz": st.sampled_from([True, "s", 1, None])})
    | st.tuples(_NUMBERS, st.sampled_from(["s", 1]), st.lists(_NUMBERS, max_size=5)).map(
        lambda t: [t[0], t[1], *t[2]])
    | st.lists(_NUMBERS, max_size=3)
    | st.sampled_from(["no", "yes", "", True, False, 1, 1.0])
)
_EVERY_VALIDATOR = Draft202012Validator(_EVERY_KEYWORD)


@settings(max_examples=500, deadline=None)
@given(_JSON | _SHAPED)
def test_schema_precheck_equals_jsonschema_on_every_keyword(value):
    assert schemacheck.conforms(_EVERY_KEYWORD, value) == _EVERY_VALIDATOR.is_valid(value)


def test_schema_precheck_an_unknown_keyword_is_unsure():
    # reached: no verdict (jsonschema decides); not reached (an earlier keyword fails): no
    schema = {"type": "object", "properties": {"a": {"type": "string", "format2": 1}}}
    assert not schemacheck.conforms(schema, {"a": "x"})
    assert not schemacheck.conforms(schema, {"a": 1})
    assert schemacheck.conforms(schema, {"b": 1})
    assert not schemacheck.conforms({"$ref": "#/nowhere"}, 1)
    assert not schemacheck.conforms({"type": "strange"}, 1)
