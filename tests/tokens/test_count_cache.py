"""The count cache keeps what a call counted in four columns sorted by offset (tokens/cache.py ``_Lines``),
not a dict of tuples: any order of puts and lookups answers as a dict does, and what the next call gets is
the same."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxcompact.tokens.cache import CountCache, from_bytes

_OPS = st.lists(st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 40), st.integers(0, 3)),
                max_size=80)


@given(_OPS, st.booleans())
def test_any_order_of_puts_and_lookups_answers_as_a_dict(ops: list[tuple[str, int, int]],
                                                          loaded: bool) -> None:
    cache = CountCache(key=("openai",))
    model: dict[int, tuple[int, int, int]] = {}
    if loaded:  # a last call's counts, looked up and then kept as found
        before = CountCache(key=("openai",))
        for off in range(0, 40, 3):
            before.put(off, off % 4, off, off + 1)
        cache = from_bytes(before.to_bytes(), ("openai",)) or CountCache()
        cache.use(("openai",))
    old = {off: (off % 4, off, off + 1) for off in range(0, 40, 3)} if loaded else {}
    for op, off, digest in ops:
        if op == "put":
            cache.put(off, digest, off + digest, None if digest == 3 else digest)
            model[off] = (digest, off + digest, -1 if digest == 3 else digest)
        else:
            got = cache.get(off, digest)
            hit = model.get(off) or old.get(off)
            if hit is not None and off not in model and hit[0] == digest:
                model[off] = hit  # found: kept for the next call
            want = None if hit is None or hit[0] != digest else (hit[1], None if hit[2] == -1 else hit[2])
            assert got == want
    cache.commit()
    if not model:
        model = old  # a call that saw no line leaves the last one's
    assert list(cache.offsets) == sorted(model)
    assert [(d, h, e) for d, h, e in zip(cache.digests, cache.heuristic, cache.exact, strict=True)] == \
        [model[o] for o in sorted(model)]


def test_lines_counted_in_order_take_32_bytes_each() -> None:
    import tracemalloc

    cache = CountCache(key=("openai",))
    tracemalloc.start()
    try:
        for i in range(50_000):
            cache.put(1000 + 97 * i, (i * 2654435761) % (1 << 62), 40, 41)
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size / 50_000 < 40, size / 50_000  # a dict of tuples: ~170
