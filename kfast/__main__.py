"""`python -m kfast ...` is the `kfast` command."""

from kfast.cli import main

main()
