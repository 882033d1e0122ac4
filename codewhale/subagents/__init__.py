"""Background sub-agents: roles, definitions, lifecycle, admission, delivery, records."""
