"""Whether a JSON value conforms to one of our schemas, without importing jsonschema
(docs/measurements/performance.md#a-hooks-call).

Importing jsonschema and compiling a Draft 2020-12 validator costs about 0.1 s per process, more than a small
run's whole work. Almost every line and every state conforms, so :func:`conforms` answers that question
first, for the keywords our schemas use (``type``, ``properties``, ``required``, ``additionalProperties``,
``patternProperties``, ``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``enum``, ``const``,
``minimum``, ``maximum``, ``pattern``, ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
and ``$ref`` within the document), with jsonschema's own rules (``1`` is not ``true``, ``1 == 1.0``, an
integer may be ``2.0``). Only when it says no (or meets a keyword it does not know) do the callers ask
jsonschema, whose errors are then reported exactly as before. tests/tokens/test_fastpaths.py checks every
verdict against jsonschema's on every sample line, state and random mutations of them.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
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

_MISSING = object()  # a property the value does not have


def _raise(exc: Exception) -> bool:
    raise exc


#: an inlined check longer than this is a function of its own (the generated source stays shallow)
_INLINE = 160
#: the name of the checked value in a subschema's expression until it is placed
_HERE = "__here__"


class _Compiler:
    """A schema turned into the source of Python functions, compiled once per schema: each node one boolean
    expression, its keywords' checks joined by ``and`` in the schema's order (so the first failing keyword
    answers before a later unknown one, as jsonschema's walk would), a short subschema inlined where it is
    used, a long one or a ``$ref`` a function of its own. A line is then checked by a few calls instead of
    one closure call per keyword and node (a closure per node cost every ``run`` and ``estimate`` about 6 µs
    per line, the inlined checks about a fifth of that). A keyword this checker does not implement becomes
    an expression that raises ``_Unsure`` when reached, as the walk does. The rules are the schema's: nothing
    here knows a format."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.consts: dict[str, Any] = {}
        self.defs: list[str] = []
        self.refs: dict[str, str] = {}  # a reference -> the function that checks its target
        self.names = 0

    def const(self, value: Any) -> str:
        name = f"_c{len(self.consts)}"
        self.consts[name] = value
        return name

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def compiled(self) -> Check:
        body = self.node(self.root, "v")
        src = "".join(self.defs) + f"def _root(v):\n    return {body}\n"
        ns: dict[str, Any] = {"_MISSING": _MISSING, "_is_type": _is_type, "_is_number": _is_number,
                              "_equal": _equal, "_raise": _raise, **self.consts}
        # the source holds no text of the schema: its names, values and patterns are constants passed in
        exec(compiled_code(src), ns)
        check: Check = ns["_root"]
        return check

    def function(self, s: Any, name: str | None = None) -> str:
        """The name of a function that checks ``s``."""
        name = name or self.fresh("_n")
        body = self.node(s, "v")
        self.defs.append(f"def {name}(v):\n    return {body}\n")
        return name

    def sub(self, s: Any, var: str) -> str:
        """An expression checking ``s`` on ``var``: inline when short, else a call."""
        expr = self.node(s, _HERE)  # made once: inlined, or the body of a function
        if len(expr) <= _INLINE:
            return expr.replace(_HERE, var)
        name = self.fresh("_n")
        self.defs.append(f"def {name}(v):\n    return {expr.replace(_HERE, 'v')}\n")
        return f"{name}({var})"

    def node(self, s: Any, var: str) -> str:
        if s is True:
            return "True"
        if s is False:
            return "False"
        if not isinstance(s, dict):
            return f"_raise({self.const(_Unsure('schema'))})"
        checks: list[str] = []
        for key, want in s.items():
            if key in _ANNOTATIONS or key in ("then", "else"):
                continue
            try:
                check = self.keyword(key, want, s, var)
            except (_Unsure, TypeError, AttributeError, re.error) as exc:
                err = exc if not isinstance(exc, AttributeError) else TypeError(str(exc))
                check = f"_raise({self.const(err)})"
            if check != "True":
                checks.append(check)
        if not checks:
            return "True"
        return checks[0] if len(checks) == 1 else "(" + " and ".join(checks) + ")"

    def keyword(self, key: str, want: Any, s: dict[str, Any], v: str) -> str:
        if key == "type":
            if isinstance(want, str):
                return _type_expr(want, v)
            return "(" + " or ".join([_type_expr(t, v) for t in want] or ["False"]) + ")"
        if key == "properties":
            props = []
            for k, sub in want.items():
                t = self.fresh("_t")
                check = self.sub(sub, t)
                if check != "True":
                    props.append(f"(({t} := {v}.get({self.const(k)}, _MISSING)) is _MISSING or {check})")
            if not props:
                return "True"
            return f"(not isinstance({v}, dict) or ({' and '.join(props)}))"
        if key == "required":
            names = frozenset(want)
            return f"(not isinstance({v}, dict) or {v}.keys() >= {self.const(names)})"
        if key == "additionalProperties":
            known = s.get("properties", {})
            patterns = [_regex(p) for p in s.get("patternProperties", {})]
            extra = self.node(want, "v")
            if extra == "True":
                return "True"  # every other property conforms: nothing to look at
            f = self.function(want)
            known_c, pats_c = self.const(known), self.const(patterns)
            return (f"(not isinstance({v}, dict) or all(k in {known_c} or any(p.search(k) for p in {pats_c})"
                    f" or {f}(x) for k, x in {v}.items()))")
        if key == "patternProperties":
            pats = [(self.const(_regex(p)), self.function(sub)) for p, sub in want.items()]
            each = [f"all(not {rx}.search(k) or {f}(x) for k, x in {v}.items())" for rx, f in pats]
            return f"(not isinstance({v}, dict) or ({' and '.join(each) or 'True'}))"
        if key == "items":
            start = len(s.get("prefixItems", ()))
            f = self.function(want)
            seq = f"{v}[{start}:]" if start else v
            return f"(not isinstance({v}, list) or all(map({f}, {seq})))"
        if key == "prefixItems":
            firsts = ", ".join(self.function(sub) for sub in want)
            return f"(not isinstance({v}, list) or all(c(x) for x, c in zip({v}, ({firsts},))))"
        if key == "minItems":
            return f"(not (isinstance({v}, list) and len({v}) < {self.const(want)}))"
        if key == "maxItems":
            return f"(not (isinstance({v}, list) and len({v}) > {self.const(want)}))"
        if key == "enum":
            options = list(want)
            if all(isinstance(e, str) for e in options):  # a string equals only the same string (_equal)
                return f"(isinstance({v}, str) and {v} in {self.const(frozenset(options))})"
            return f"any(_equal({v}, e) for e in {self.const(options)})"
        if key == "const":
            if isinstance(want, str):
                return f"(isinstance({v}, str) and {v} == {self.const(want)})"
            return f"_equal({v}, {self.const(want)})"
        if key == "minimum":
            return f"(not (_is_number({v}) and {v} < {self.const(want)}))"
        if key == "maximum":
            return f"(not (_is_number({v}) and {v} > {self.const(want)}))"
        if key == "pattern":
            return f"(not isinstance({v}, str) or {self.const(_regex(want))}.search({v}) is not None)"
        if key == "allOf":
            return "(" + " and ".join([self.sub(sub, v) for sub in want] or ["True"]) + ")"
        if key == "anyOf":
            return "(" + " or ".join([self.sub(sub, v) for sub in want] or ["False"]) + ")"
        if key == "oneOf":
            return f"(sum([{', '.join(self.sub(sub, v) for sub in want)}]) == 1)"
        if key == "not":
            return f"(not {self.sub(want, v)})"
        if key == "if":
            cond = self.sub(want, v)
            then = self.sub(s["then"], v) if "then" in s else "True"
            other = self.sub(s["else"], v) if "else" in s else "True"
            return f"({then} if {cond} else {other})"
        if key == "$ref":
            return f"{self.ref(want)}({v})"
        raise _Unsure(key)

    def ref(self, ref: str) -> str:
        """The function that checks a reference's target (a schema may refer to itself)."""
        name = self.refs.get(ref)
        if name is None:
            name = self.refs[ref] = self.fresh("_r")
            try:
                target = _resolve(self.root, ref)
            except _Unsure as exc:
                self.defs.append(f"def {name}(v):\n    return _raise({self.const(exc)})\n")
            else:
                self.function(target, name)
        return name


# A code object's marshal format is the interpreter's own: the header and the key carry its bytecode magic.
_CODE_MAGIC = b"CTXSCHK1" + MAGIC_NUMBER + sys.implementation.cache_tag.encode().ljust(20, b"_")[:20]
_CODE_LIMIT = 16 * 1024 * 1024


def code_path(src: str) -> Path:
    """Where the code compiled from ``src`` is cached: named by the hash of the source and the interpreter,
    so a changed schema or checker is another file and a stale one is never read."""
    from .paths import cache_dir

    key = hashlib.sha256(_CODE_MAGIC + src.encode()).hexdigest()[:32]
    return cache_dir() / f"schemacheck-{key}.code"


def compiled_code(src: str) -> CodeType:
    """``compile(src)``, from the user's cache when an earlier process compiled the same source (compiling
    the state's and a format's checks cost every process ~13 ms:
    docs/measurements/performance-log.md#the-per-call-floor-cached-checks-own-lock-lazy-commands-2026-11-29).
    The file holds the marshalled code after the magic and the code's SHA-256: a file that is short, another
    interpreter's, corrupt or not a code object, or not the user's own, is ignored and written again."""
    from .errors import CtxCompactError
    from .paths import read_regular

    path = code_path(src)
    try:
        data = read_regular(path, "compiled schema check", _CODE_LIMIT, follow=False, private=True)
    except (OSError, CtxCompactError):
        data = b""
    at = len(_CODE_MAGIC)
    head = at + 32
    if data[:at] == _CODE_MAGIC and hashlib.sha256(data[head:]).digest() == data[at:head]:
        try:
            code = marshal.loads(data[head:])
        except (ValueError, EOFError, TypeError):
            code = None
        if isinstance(code, CodeType):
            _still_used(path)
            return code
    code = compile(src, "<schemacheck>", "exec")
    _save_code(path, code)
    return code


# A cache file no process has read for this long is another schema's, checker's or interpreter's (each
# writes its own file and never reads the others): it is removed when a new one is written. A file in use
# has its time of change renewed at most once a day, so it is never taken for a stale one.
_STALE_AFTER = 30 * 86400
_RENEW_AFTER = 86400
_CODE_NAME = re.compile(r"schemacheck-[0-9a-f]{32}\.code")


def _still_used(path: Path) -> None:
    """Mark the cache file just read as in use (its mtime), when it was last marked over a day ago."""
    if os.utime not in os.supports_follow_symlinks:  # (never through a link; where it cannot, not renewed)
        return
    try:
        if time.time() - os.stat(path, follow_symlinks=False).st_mtime > _RENEW_AFTER:
            os.utime(path, follow_symlinks=False)
    except OSError:
        pass


def remove_stale(folder: Path, keep: Path) -> list[Path]:
    """Remove the cache files of compiled checks in ``folder`` that no process has read for
    :data:`_STALE_AFTER` (named as ours, regular files of the user's own; never a link, nor ``keep``), and
    return them. What cannot be removed is left."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    own = os.geteuid() if hasattr(os, "geteuid") else None
    for entry in entries:
        if entry.name == keep.name or not _CODE_NAME.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if (not stat.S_ISREG(st.st_mode) or (own is not None and st.st_uid != own)
                    or now - st.st_mtime <= _STALE_AFTER):
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _save_code(path: Path, code: CodeType) -> None:
    """Write the cache atomically; a cache that cannot be written is simply not kept."""
    from .atomic import atomic_write
    from .errors import CtxCompactError

    payload = marshal.dumps(code)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _CODE_MAGIC + hashlib.sha256(payload).digest() + payload)
    except (OSError, CtxCompactError):
        return
    remove_stale(path.parent, path)


def _type_expr(t: str, v: str) -> str:
    if t == "string":
        return f"isinstance({v}, str)"
    if t == "object":
        return f"isinstance({v}, dict)"
    if t == "array":
        return f"isinstance({v}, list)"
    if t == "null":
        return f"{v} is None"
    if t in ("integer", "number", "boolean"):
        return f"_is_type({v}, {t!r})"
    raise _Unsure(t)


_compiled: dict[int, tuple[Any, Check]] = {}


def _check_of(schema: Any) -> Check:
    """The compiled check of ``schema`` (kept with the schema itself, so its id stays its own)."""
    hit = _compiled.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_compiled) > 256:
        _compiled.clear()
    check = _Compiler(schema).compiled()
    _compiled[id(schema)] = (schema, check)
    return check


def conforms(schema: Any, value: Any) -> bool:
    """True when ``value`` conforms to ``schema`` for certain; False when it does not or this checker cannot
    tell (then ask jsonschema)."""
    try:
        return _check_of(schema)(value)
    except (_Unsure, RecursionError, TypeError, re.error):
        return False
