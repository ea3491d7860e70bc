"""Whether this server can run simulations at all (the ``ml`` extra), asked without importing torch."""

from __future__ import annotations

import functools
import importlib.util

from django.utils.translation import gettext as _

NEEDED = ("torch", "transformers", "peft")


@functools.lru_cache(maxsize=1)
def _missing() -> tuple[str, ...]:
    return tuple(name for name in NEEDED if importlib.util.find_spec(name) is None)


def simulation_unavailable() -> str | None:
    """A sentence for the page when the ml extra is missing here, else ``None``."""
    missing = _missing()
    if not missing:
        return None
    return _("This server cannot simulate: %(missing)s not installed (pip install 'anchorgpu[ml]').") % {
        "missing": ", ".join(missing)}
