"""Accounts: people sign themselves up, verify their email, reset and change their password,
see and end their sessions, and create orgs (contract sections 3 and 3a)."""
