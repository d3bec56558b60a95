"""Drop-in adapters for agent frameworks (docs/guides/frameworks.md), one module each, each an optional
extra: they turn the framework's messages into a list :func:`ctxcompact.compact` takes and back, and nothing
more (every rule is the engine's)."""
