"""The operator's tool that clears an order's chain alert (``payments.chain_alerts``), with a reason that
goes to the audit log. Registered among the order's tools in ``admin_actions``."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _l

from anchorgpu.payments.chain_alerts import chain_alert_clear

NAME = "clear_chain_alert"
TITLE = _l("Clear the chain alert")
BUTTON = _l("Clear the alert")
INTRO = _l("The chain watcher found that money it had counted for this order is no longer on chain. Clear the "
           "alert once you have checked it (e.g. the customer paid again, or the order was settled another way); "
           "the order itself is not changed. Your reason is written to the audit log.")


def apply_clear(order, data, actor, transfer):
    chain_alert_clear(order=order, actor=actor, reason=data["reason"])
    return _("The chain alert is cleared.")
