"""Governed access to user tables: the gate, governed reads, and the one write service."""
