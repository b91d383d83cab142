"""Database access: engine construction, the embedded server, platform tables, migrations."""
