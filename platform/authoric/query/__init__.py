"""The filter language, ordering and keyset pagination, compiled to SQLAlchemy with bound values."""
