"""ctxcompact: validate, clean, estimate and compact LLM agent transcripts.

The public API lives in :mod:`ctxcompact.api`; importing this package stays cheap (no SDKs, no tiktoken).
"""

__version__ = "0.1.0"

_LAZY = {"compact": "messages", "acompact": "messages", "Session": "messages", "CompactResult": "messages"}


def __getattr__(name: str) -> object:
    # ``ctxcompact.compact`` and ``ctxcompact.Session`` load the engine on first use, not on import
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxcompact' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"ctxcompact.{module}"), name)
