"""The change log (outbox): recording changes, stamping positions in commit order, retention."""
