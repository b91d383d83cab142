"""The query layer: compiles filters, fields and orders into SQL expressions for one table.

It knows tables (the catalog) and column types, and no policy: the policy layer compiles row
policies with it, and the plan layer builds governed statements on top of both."""
