"""`python -m ctxcompact` runs the CLI."""

from .cli import main

main()
