"""Routing: sets each record's target tables — one table, by a field's value, or by topic."""
