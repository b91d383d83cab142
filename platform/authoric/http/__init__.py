"""FastAPI routers: parse the request, call a service, serialize the answer. No SQL, no policy."""
