"""Authorization: roles, the Casbin enforcer, and the decision every governed read or write uses."""
