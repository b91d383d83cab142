"""The per-app OpenAPI documents: a row schema and the routes of every table an app's caller may
read, and the multi-table stream's part. Built from the catalog's snapshot and the policy's grants;
above both catalog and realtime, so neither of them imports the document that describes them.
`http/openapi.py` only serves it."""
