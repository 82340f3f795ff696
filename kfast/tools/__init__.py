"""Command-line tools (each registered as a ``kfast`` subcommand in kfast.cli)."""
