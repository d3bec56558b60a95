"""The README stays short and its Python recipe runs as printed.

The README is what a newcomer reads in five minutes (issue 28): at most 15 KB, the rest in docs/. Its Python
hook is executed here on the bundled Anthropic sample, with a usage object shaped like the Anthropic SDK's,
so the recipe cannot drift from the API; the prompt tokens it reports must include the cached parts.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxcompact import api

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_is_at_most_15_kb() -> None:
    assert README.stat().st_size <= 15 * 1024


def test_readme_python_recipe_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README lost its Python recipe"
    shutil.copy(ROOT / "samples" / "anthropic-session.jsonl", tmp_path / "agent.jsonl")
    monkeypatch.chdir(tmp_path)
    ns: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)
    system, messages = ns["before_model"]()  # type: ignore[operator]
    assert system and messages and all(m["role"] in ("user", "assistant") for m in messages)
    # the same recipe compacts once the window is small, and the context is still valid Messages input
    ns["opts"] = api.Options(window=3_000, keep_trailing_results=True)
    system, messages = ns["before_model"]()  # type: ignore[operator]
    assert "[ctxcompact summary of the earlier conversation]" in json.dumps(messages)
    assert system and messages[0]["role"] == "user"
    # after the call: the prompt Anthropic billed is all three parts, cached ones included
    usage = SimpleNamespace(input_tokens=3, cache_read_input_tokens=2_900, cache_creation_input_tokens=310)
    ns["after_model"](usage)  # type: ignore[operator]
    state = api.load_state(tmp_path / "agent.jsonl.ctxstate.json")
    assert state is not None and state.calibration.real == 3 + 2_900 + 310
