"""Routing: sets each record's target table (one table per pipeline today)."""
