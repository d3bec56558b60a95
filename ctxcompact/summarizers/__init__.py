"""Summarizer registry. ``get_summarizer(name, **options)`` builds one by name.

Every summarizer module is imported inside :func:`get_summarizer`, so ``import ctxcompact.summarizers`` never
loads an SDK (anthropic, openai).
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import SummarizerError, UsageError
from ..options import Options
from .base import Summarizer, SummaryRequest, SummaryResult

__all__ = ["SUMMARIZERS", "Summarizer", "SummaryRequest", "SummaryResult", "get_summarizer", "summarizer_for"]

# name -> (module, class name)
_REGISTRY: dict[str, tuple[str, str]] = {
    "extractive": ("ctxcompact.summarizers.extractive", "ExtractiveSummarizer"),
    "anthropic": ("ctxcompact.summarizers.anthropic", "AnthropicSummarizer"),
    "openai": ("ctxcompact.summarizers.openai", "OpenAISummarizer"),
}
SUMMARIZERS: tuple[str, ...] = tuple(_REGISTRY)


def _find_class(module: Any, class_name: str, name: str) -> type[Summarizer] | None:
    cls = getattr(module, class_name, None)
    if isinstance(cls, type) and issubclass(cls, Summarizer):
        return cls
    # Tolerate another class name: the Summarizer subclass defined there whose ``name`` matches.
    for value in vars(module).values():
        if (isinstance(value, type) and issubclass(value, Summarizer) and value is not Summarizer
                and getattr(value, "name", "") == name):
            return value
    return None


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """The summarizer called ``name`` (``extractive``, ``anthropic``, ``openai``), built with ``options``.

    Raises UsageError for an unknown name, SummarizerError when the module cannot be loaded (the pipeline
    then falls back to extractive)."""
    key = (name or "").strip().lower()
    if key not in _REGISTRY:
        raise UsageError(f"unknown summarizer {name!r}; choose one of: {', '.join(SUMMARIZERS)}")
    module_name, class_name = _REGISTRY[key]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise SummarizerError(f"summarizer {key!r} is not available: {e}") from None
    cls = _find_class(module, class_name, key)
    if cls is None:
        raise SummarizerError(f"summarizer {key!r} is not available: {module_name} defines no summarizer")
    return cls(**options)


def summarizer_for(opts: Options) -> Summarizer:
    """The summarizer the options ask for (``--summarizer`` and the provider options)."""
    if opts.summarizer == "extractive":
        return get_summarizer("extractive")
    window, source = summary_window(opts)
    return get_summarizer(opts.summarizer, model=opts.summary_model, api_key=opts.api_key,
                          base_url=opts.base_url, timeout=opts.timeout, max_retries=opts.max_retries,
                          instructions=opts.instructions, context_window=window, window_source=source)


def summary_window(opts: Options) -> tuple[int | None, str | None]:
    """The summarizer's own window and where it came from: ``--summary-window``, else the models table and
    the user config for ``--summary-model``; (None, None) when neither knows it (the summarizer then asks
    the server, docs/guides/local-models.md#the-summarizers-window)."""
    if opts.summary_window:
        return int(opts.summary_window), "--summary-window"
    if opts.summary_model and opts.summary_model.strip():
        from ..budget import lookup_window

        try:
            return lookup_window(opts.summary_model, opts.config_path)
        except UsageError:
            return None, None  # a model the table does not know: a local one, most likely
    return None, None
