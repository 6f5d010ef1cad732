"""Command-line interface (``frazil``)."""
