"""Authoric: a multi-tenant backend-as-a-service with a governed, live change feed."""

__version__ = "0.1.0"
