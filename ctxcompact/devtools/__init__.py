"""Developer tooling: the stress matrix (``ctxcompact simulate``) and the pruning comparison. It drives the
public API only; nothing in the runtime imports it."""
