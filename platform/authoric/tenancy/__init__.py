"""Tenancy administration: organizations, users, memberships and roles of an app."""
