"""Services behind the console's routes (contract section 2a): admin rows across orgs,
impersonation tokens, policy previews and the audit log."""
