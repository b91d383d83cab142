"""authoric-client: Authoric's HTTP contract for Python apps (`Client`, `AsyncClient`)."""

from authoric_client.aclient import AsyncClient, AsyncTable, AsyncTables
from authoric_client.errors import AuthoricError
from authoric_client.filters import BoolOps, IntOps, JsonOps, NumberOps, TextOps
from authoric_client.live import AsyncLiveQuery
from authoric_client.models import Event, Page
from authoric_client.stream import AsyncSubscription, Backoff
from authoric_client.sync import Client, LiveQuery, Subscription, Table, Tables

__all__ = ["AsyncClient", "AsyncLiveQuery", "AsyncSubscription", "AsyncTable", "AsyncTables",
           "AuthoricError", "Backoff", "BoolOps", "Client", "Event", "IntOps", "JsonOps", "LiveQuery",
           "NumberOps", "Page", "Subscription", "Table", "Tables", "TextOps"]
