"""Authentication: passwords, signed tokens, sessions (refresh rotation), the admin token."""
