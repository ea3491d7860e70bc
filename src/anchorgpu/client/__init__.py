"""A command-line client of the shop's JSON API (no Django needed)."""
