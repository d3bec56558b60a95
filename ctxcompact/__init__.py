"""ctxcompact: validate, clean, estimate and compact LLM agent transcripts.

The public API lives in :mod:`ctxcompact.api`; importing this package stays cheap (no SDKs, no tiktoken).
"""

__version__ = "0.1.0"
