"""The README stays short and its Python recipe runs as printed.

The README is what a newcomer reads in five minutes (issue 28): at most 15 KB, the rest in docs/. Its Python
hook (the message-list API) is executed here on the bundled OpenAI sample, as printed and at a small window,
and fed the Anthropic SDK's own usage object, so the recipe cannot drift from the API; the prompt tokens it
records must include the cached parts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from anthropic.types import Usage

from ctxcompact.facts.text import SUMMARY_MARKER

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_is_at_most_15_kb() -> None:
    assert README.stat().st_size <= 15 * 1024


def _recipe() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README lost its Python recipe"
    return blocks[0]


def test_readme_python_recipe_runs() -> None:
    messages = [json.loads(line) for line in (ROOT / "samples" / "openai-long.jsonl").read_text().splitlines()
                if line.strip()]
    ns: dict[str, object] = {}
    exec(compile(_recipe(), "README.md", "exec"), ns)
    sent = ns["before_model"](messages)  # type: ignore[operator]
    # below the threshold of a 200k window: the very list, the very objects
    assert len(sent) == len(messages) and all(a is b for a, b in zip(sent, messages, strict=True))

    # the same recipe at a small window compacts, and the result is still chat messages
    small = _recipe().replace("window=200_000", "window=8_000")
    assert small != _recipe()
    ns = {}
    exec(compile(small, "README.md", "exec"), ns)
    sent = ns["before_model"](messages)  # type: ignore[operator]
    assert len(sent) < len(messages) and SUMMARY_MARKER in json.dumps(sent)
    assert sent[0] is messages[0] and sent[0]["role"] == "system"
    assert messages[-1]["content"] in sent[-1]["content"]  # the continuation quotes the latest request
    # after the call: the prompt Anthropic billed is all three parts, cached ones included
    # (the Anthropic SDK's own usage object)
    usage = Usage(input_tokens=3, output_tokens=40, cache_read_input_tokens=2_900,
                  cache_creation_input_tokens=310)
    ns["after_model"](SimpleNamespace(usage=usage))  # type: ignore[operator]
    state = ns["session"].state  # type: ignore[attr-defined]
    assert state is not None and state.calibration.real == 3 + 2_900 + 310
