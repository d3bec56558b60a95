"""Summarizers by name (:data:`ctxcompact.plugins.SUMMARIZERS`): ``get_summarizer(name, **options)`` builds
one.

Every summarizer module is imported inside :func:`get_summarizer`, so ``import ctxcompact.summarizers`` never
loads an SDK (anthropic, openai).
"""

from __future__ import annotations

from typing import Any

from ..errors import SummarizerError, UsageError
from ..options import Options
from ..plugins import OFFLINE, key
from ..plugins import SUMMARIZERS as REGISTRY
from .base import Summarizer, SummaryRequest, SummaryResult

__all__ = ["SUMMARIZERS", "Summarizer", "SummaryRequest", "SummaryResult", "get_summarizer", "summarizer_for"]

SUMMARIZERS: tuple[str, ...] = REGISTRY.builtin_names()


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """The summarizer called ``name`` (``extractive``, ``anthropic``, ``openai``), built with ``options``.

    Raises UsageError for an unknown name, SummarizerError when the module cannot be loaded (the pipeline
    then falls back to extractive)."""
    try:
        cls = REGISTRY.get(name or "")
    except ImportError as e:
        raise SummarizerError(f"summarizer {key(name)!r} is not available: {e}") from None
    return cls(**options)


def summarizer_for(opts: Options) -> Summarizer:
    """The summarizer the options ask for (``--summarizer`` and the provider options)."""
    if REGISTRY.has(opts.summarizer, OFFLINE):  # (plugins.OFFLINE: it takes none of the provider options)
        return get_summarizer(opts.summarizer)
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
