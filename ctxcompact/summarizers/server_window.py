"""The window an OpenAI-compatible server reports for a model
(docs/guides/local-models.md#the-summarizers-window).

Read, first found wins:

1. ``GET {base_url}/models``, the entry whose ``id`` is the model (or the only entry): ``max_model_len``
   (vLLM), ``loaded_context_length``, ``context_length``, ``max_context_length`` (LM Studio and gateways
   that add it), ``meta.n_ctx``;
2. ``GET {server root}/props`` (llama.cpp's ``llama-server``): ``default_generation_settings.n_ctx``, the
   window the server was started with;
3. ``meta.n_ctx_train`` of the models entry (llama.cpp: the window the model was trained with, an upper
   bound of what the server may have been started with).

Ollama and llama-cpp-python's server report none of these: give ``--summary-window`` (a context-length
error is retried once with the window the server names in it). Any failure (connection, status, body) means
"not reported"; the summary itself then says what is wrong.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

MODEL_KEYS = ("max_model_len", "loaded_context_length", "context_length", "max_context_length")


def _get(url: str, key: str, timeout: float) -> Any:
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status != 200:
                return None
            return json.loads(resp.read(1_000_000))
    except (OSError, ValueError):
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_in_models(body: Any, model: str) -> tuple[int | None, int | None, str | None]:
    """(runtime window, training window, key read) from a ``/models`` reply."""
    data = body.get("data") if isinstance(body, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    entry = next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else None)
    if entry is None:
        return None, None, None
    meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    for key in MODEL_KEYS:
        if _positive(entry.get(key)):
            return entry[key], None, key
    if _positive(meta.get("n_ctx")):
        return meta["n_ctx"], None, "meta.n_ctx"
    return None, _positive(meta.get("n_ctx_train")), None


def window_in_props(body: Any) -> int | None:
    """llama.cpp's ``/props``: the window the server runs with."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return int(settings["n_ctx"])
    return _positive(body.get("n_ctx"))


def server_window(base_url: str, model: str, key: str, timeout: float) -> tuple[int, str] | None:
    """(window, source) as the server at ``base_url`` reports it for ``model``, or None."""
    base = base_url.rstrip("/")
    runtime, trained, field = window_in_models(_get(f"{base}/models", key, timeout), model)
    if runtime:
        return runtime, f"server: /models {field}"
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    props = window_in_props(_get(f"{root}/props", key, timeout))
    if props:
        return props, "server: /props n_ctx"
    if trained:
        return trained, "server: /models meta.n_ctx_train"
    return None
