"""Counting a context record by record with the run's estimator: the chars/4 heuristic always, tiktoken when
``--exact tiktoken`` (the default). What is counted is the one rule of :func:`ctxcompact.model.token_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model import Record, Role, token_text
from ..options import Options
from ..plugins import DEFAULT_ENCODING, LOCAL_COUNTERS, PROVIDER_COUNTERS
from ..reader import line_digest
from . import heuristic
from .cache import CountCache
from .calibration import Calibrated

#: what a text costs in the window's tokens (the run's counter and calibration)
TextCost = Callable[[str], int]


@dataclass(slots=True)
class Counts:
    """Tokens per record (0 for records with no message): lists, or arrays where a file is read record by
    record (``streaming``: 4 bytes a record, ``columns``, not a list's slot and an int's object)."""

    heuristic: Sequence[int]
    exact: Sequence[int] | None
    encoding: str | None

    @property
    def base(self) -> Sequence[int]:
        """The counts the run decides with: exact when counted, else the heuristic."""
        return self.exact if self.exact is not None else self.heuristic

    @property
    def estimator(self) -> str:
        """What made :attr:`base`: ``tiktoken:<encoding>`` or ``heuristic`` (a measured factor holds only for
        the estimator it was measured with)."""
        return f"tiktoken:{self.encoding}" if self.exact is not None else "heuristic"

    @property
    def exact_counted(self) -> bool:
        return self.exact is not None


def encoding_name(opts: Options) -> str:
    """The tiktoken encoding: ``--encoding``, else the one for ``--model``, else the default
    (``plugins.DEFAULT_ENCODING``)."""
    if opts.encoding:
        return opts.encoding
    from .exact import encoding_for_model

    return encoding_for_model(opts.model) if opts.model else DEFAULT_ENCODING


def check_exact(opts: Options) -> None:
    """``--exact`` names a counter we have (``plugins.COUNTERS``): tiktoken, none, or a provider endpoint
    (Anthropic's only)."""
    if opts.exact not in LOCAL_COUNTERS and not PROVIDER_COUNTERS.get(opts.exact, False):
        from .provider import unsupported_provider

        raise unsupported_provider(opts.exact)


def count_key(opts: Options, fmt: str) -> tuple[str, str | None]:
    """What a record's counts depend on besides its bytes: the format that parsed it and the encoding."""
    return (fmt, encoding_name(opts) if opts.exact != "none" else None)


def count_records(records: list[Record], opts: Options, cache: CountCache | None = None) -> Counts:
    """Each record's tokens with the run's estimator (exact counts in one batched call). With ``cache``, an
    input record (its own line, unchanged) whose offset and digest the cache holds is not counted again, and
    what is counted is added to it (docs/concepts/state.md#the-count-cache)."""
    exact_on = opts.exact != "none"
    name = encoding_name(opts) if exact_on else None
    heur = [0] * len(records)
    ex: list[int] | None = [0] * len(records) if exact_on else None
    todo: list[int] = []  # records to count exactly
    texts: list[tuple[list[str], int]] = []  # their token_text, worked out once for both counters
    keys: dict[int, tuple[int, int] | None] = {}  # index -> (offset, digest) of a line, None: a made record
    proven = cache.proven if cache is not None else 0  # a line in the proven settled prefix is not hashed
    for i, r in enumerate(records):
        msg = r.message
        if msg is None:
            continue
        if cache is not None:
            line = r.raw is not None and r.offset >= 0 and not r.dirty
            kept = cache.get_proven(r.offset) if line and r.offset + len(r.raw) <= proven else None  # type: ignore[arg-type]
            hit: tuple[int, int | None] | None
            if kept is not None:
                digest, hit = kept
            else:
                digest = line_digest(r.raw) if line else 0  # type: ignore[arg-type]
                hit = cache.get(r.offset, digest) if line else cache.get_made(msg)
            if hit is not None and (hit[1] is not None or not exact_on):
                heur[i] = hit[0]
                n = hit[1]
                if ex is not None and n is not None:
                    ex[i] = n
                continue
            if cache.keep:  # (a cache only looked up keeps nothing: no memory per record)
                keys[i] = (r.offset, digest) if line else None
        text = token_text(msg)
        heur[i] = heuristic.texts_tokens(*text)
        if exact_on:
            todo.append(i)
            texts.append(text)
    if ex is not None and name is not None and todo:
        from . import exact

        for i, n in zip(todo, exact.count_token_texts(texts, name), strict=True):
            ex[i] = n
    if cache is not None:
        for i, key in keys.items():
            n = ex[i] if ex is not None else None
            if key is None:
                cache.put_made(records[i].message, heur[i], n)
            else:
                cache.put(key[0], key[1], heur[i], n)
    return Counts(heur, ex, name)


def system_tokens(base: Sequence[int], records: list[Record]) -> int:
    """Tokens of the system records: they are kept verbatim, so no compaction can shrink them."""
    pairs = zip(base, records, strict=True)
    return sum(c for c, r in pairs if r.message is not None and r.message.role is Role.SYSTEM)


def text_cost(opts: Options, calibrated: Calibrated | None = None) -> TextCost:
    """The cost of a text in the window's own tokens: the run's counter (tiktoken with the run's encoding, or
    chars/4 with ``--exact none``: the one :func:`count_records` uses) times the calibration's rate per token
    (:meth:`Calibrated.cost`; the counter's default factor without a calibration). The one measure a
    summary is fitted to its budget with (docs/concepts/summary.md#the-budget)."""
    from .calibration import default_factor

    rate = calibrated if calibrated is not None else Calibrated(
        tokens=0, calibrated=0, base=0, source="default", real=None,
        factor=default_factor(exact_counted=opts.exact != "none", override=opts.default_factor),
        default=default_factor(exact_counted=opts.exact != "none", override=opts.default_factor))
    if opts.exact == "none":
        return lambda text: rate.cost(heuristic.text_tokens(text))
    from . import exact

    name = encoding_name(opts)
    return lambda text: rate.cost(exact.count_text(text, name))
