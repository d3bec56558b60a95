"""A streamed compaction with an LLM summarizer that the held route must make after all (found by
bench/fuzz_routes.py's ``llm`` check, seed 1405): the summary would not make the context smaller, so pass 2
gives up (``route_held.apply_strategy``: Unstreamable) and the held route summarizes again. The output,
warnings and exit code agree, and the provider is asked once for the summary, as by the held route
(``summarizers.base.replies_kept``: it was asked twice)."""

from __future__ import annotations

from pathlib import Path

from providers import ProviderServer
from test_llm_streamed import _echo

from ctxcompact import api

LOG = Path(__file__).parent.parent / "data" / "claude-code" / "agtrace-claude-session.jsonl"


def _run(work: Path, hold: bool) -> tuple[object, ...]:
    work.mkdir()
    path = work / "t.jsonl"
    path.write_bytes(b"".join(LOG.read_bytes().splitlines(keepends=True)[:9]))  # (a short conversation)
    with ProviderServer() as server:
        server.push(*[_echo("openai")] * 10)
        said: list[str] = []
        r = api.run(path, api.Options(window=20_000, use_state=False, summarizer="openai", summary_model="m",
                                      base_url=server.openai_url, api_key="k-test", max_retries=0),
                    output=work / "out.jsonl", warn=said.append, hold=hold)
        return (r.exit_code, r.compacted, said, (work / "out.jsonl").read_bytes(),
                [(x.path, x.raw) for x in server.received])


def test_the_fallback_writes_what_the_held_route_writes(tmp_path: Path) -> None:
    held, streamed = _run(tmp_path / "h", True), _run(tmp_path / "s", False)
    assert held[:4] == streamed[:4]
    assert not held[1] and "compaction would not make the context smaller" in held[2][0]


def test_the_fallback_sends_the_held_routes_requests_once(tmp_path: Path) -> None:
    held, streamed = _run(tmp_path / "h", True), _run(tmp_path / "s", False)
    assert len(held[4]) == 1
    assert streamed[4] == held[4]
