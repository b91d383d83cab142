"""What binds the platform to its server's and framework's internals, and nothing else.

Routers stay in `authoric.http`; these modules reach past uvicorn's and FastAPI's public
interfaces, for speed (wire, lean) or to pass a connection between workers (handoff). What
each relies on, all checked by tests/unit/test_serving_contract.py against the versions below
(an upgrade of either fails that test until it is checked again and these are moved on):

`serving/wire.py` (a live frame written straight to the stream's connection):
- `uvicorn.protocols.http.httptools_impl.RequestResponseCycle`: the response `send` uvicorn
  gives the app is a bound method of it (`send.__self__`);
- the cycle's attributes `transport`, `flow`, `disconnected`, `response_started`,
  `response_complete` and `chunked_encoding`, set in its `__init__`;
- `uvicorn.protocols.http.flow_control.FlowControl.write_paused`;
- a chunked body chunk framed as `b"%x\\r\\n%b\\r\\n"`, as uvicorn's own `send` frames it.

`serving/handoff.py` (a stream's connection handed to the worker of its org):
- `uvicorn.Config(app, interface=, log_config=, proxy_headers=, forwarded_allow_ips=)`, its
  `load()`, `encoded_headers` and `http_protocol_class`;
- `uvicorn.server.ServerState()` with `connections` and `default_headers`;
- the protocol class built as `http_protocol_class(config=, server_state=, app_state=)`, with
  `data_received` (the request's head, read by the sending worker) and `shutdown`;
- the cycle's `transport` (through `wire.transport_of`): `get_extra_info("socket")`.

`serving/lean.py` (a route served without FastAPI's dependency solving):
- `fastapi.routing.APIRoute.get_route_handler(self)`, which `APIRoute.__init__` calls to build
  the route's ASGI app.

`authoric serve` (cli.py) uses only uvicorn's public `Config`, `Server` and
`supervisors.Multiprocess(config, sockets=)`; the contract test holds their shape too.
"""

# The versions the contract above was last checked against (requirements.lock pins them).
UVICORN_CHECKED = "0.55.0"
FASTAPI_CHECKED = "0.165.0"
