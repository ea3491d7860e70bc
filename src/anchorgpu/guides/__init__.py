"""Guides: long-form articles kept as Markdown, one file per language, rendered per request."""
