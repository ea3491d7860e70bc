"""How a webhook URL is shown: in logs, in the admin and in the audit log (no Django, no models)."""

from urllib.parse import urlsplit


def shown_url(url: str) -> str:
    """The URL without its query or fragment (which may hold a receiver's token), for logs and the admin."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
