"""The catalog: apps and the tables their owners define (definitions, DDL, cached metadata)."""
