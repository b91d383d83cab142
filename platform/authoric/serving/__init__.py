"""What binds the platform to its server's and framework's internals: uvicorn's request cycle
and HTTP protocol (wire, handoff) and FastAPI's route class (lean). What each relies on is
listed in its module's docstring, and tests/unit/test_serving_contract.py fails when an upgrade
changes any of it."""
