"""Implementations of the `authoric` subcommands that work with data (import, export, seed)."""
