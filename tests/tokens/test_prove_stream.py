"""``CountCache.prove_stream``: the one pass in which a resumed call proves the settled prefix, its resume
point and a state's covered prefix. It reads the file into one buffer again and again; whatever the
chunk's size and wherever the points fall against its edges, it gives what hashing the bytes whole gives."""

from __future__ import annotations

import hashlib
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.tokens import cache as cache_mod
from ctxcompact.tokens.cache import CountCache


class _Trickle(io.BytesIO):
    """A stream that hands out at most ``most`` bytes a read, as a pipe or a slow disk may."""

    def __init__(self, data: bytes, most: int) -> None:
        super().__init__(data)
        self.most = most

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def,override]
        view = memoryview(b)
        return super().readinto(view[:self.most])


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the chunk set per example)
@given(data=st.binary(min_size=0, max_size=200), chunk=st.integers(1, 17), most=st.integers(1, 40),
       settled=st.integers(0, 220), at=st.integers(0, 220), also=st.integers(0, 220),
       changed=st.sampled_from(["nothing", "settled", "resume point"]))
def test_any_chunk_gives_the_whole_bytes_hashes(monkeypatch, data, chunk, most, settled, at, also, changed):
    monkeypatch.setattr(cache_mod, "PROVE_CHUNK", chunk)
    cache = CountCache()
    cache.settled, cache.settled_sha256 = settled, _sha(data[:settled])
    cache.resume, cache.resume_at, cache.resume_sha256 = {"kept": 1}, at, _sha(data[:at])
    if changed == "settled":
        cache.settled_sha256 = _sha(b"other" + data[:settled])
    elif changed == "resume point":
        cache.resume_sha256 = _sha(b"other")

    at_hash, also_hash = cache.prove_stream(_Trickle(data, most), also)

    settled_ok = 0 < settled <= len(data) and changed != "settled"
    assert cache.proven == (settled if settled_ok else 0)
    assert cache._hash.digest() == _sha(data[:cache.proven])
    at_ok = settled_ok and 0 < at <= settled and changed != "resume point"
    assert (at_hash.digest() if at_hash is not None else None) == (_sha(data[:at]) if at_ok else None)
    want_also = _sha(data[:also]) if 0 < also <= len(data) else None
    assert (also_hash.digest() if also_hash is not None else None) == want_also


def test_the_buffer_is_no_longer_than_the_furthest_point(monkeypatch):
    """(A prefix of a few bytes is not read with a 1 MB buffer.)"""
    sizes: list[int] = []
    real = bytearray

    def spy(n=0):  # type: ignore[no-untyped-def]
        sizes.append(n)
        return real(n)

    monkeypatch.setattr(cache_mod, "bytearray", spy, raising=False)
    data = b"x" * 100
    cache = CountCache()
    cache.settled, cache.settled_sha256 = 60, _sha(data[:60])
    cache.prove_stream(io.BytesIO(data), 80)
    assert sizes == [80] and cache.proven == 60
