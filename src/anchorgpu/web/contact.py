"""The contact page: how to reach the operators, from their settings (``payments.PaymentSettings``: an
e-mail address, another channel, when they answer). With nothing set, the address the shop's e-mails come
from. Linked from every "contact us" the customer meets (an expired order, a refused transfer)."""

from __future__ import annotations

from email.utils import parseaddr

from django.conf import settings
from django.shortcuts import render

from anchorgpu.payments.models import PaymentSettings


def contact_details() -> dict:
    row = PaymentSettings.objects.order_by("pk").first()
    email = (row.contact_email if row else "") or parseaddr(settings.DEFAULT_FROM_EMAIL)[1]
    return {"contact_email": email, "contact_other": row.contact_other if row else "",
            "contact_hours": row.contact_hours if row else ""}


def contact(request):
    context = contact_details()
    order = (request.GET.get("order") or "").strip()[:40]
    context["order_reference"] = order if order.replace("-", "").isalnum() else ""
    return render(request, "web/contact.html", context)
