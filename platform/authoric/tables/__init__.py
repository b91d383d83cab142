"""Table administration: an app's table definitions, their schema changes and column
conversions, and the indexes owners define on them. Above the change log (a schema change
files its entries and turns capture on or off) and tenancy (a table's columns are checked
against the roles' policies)."""
