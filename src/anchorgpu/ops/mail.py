"""The mail transport of a shop that sends no e-mail (``ANCHORGPU_EMAIL_DISABLED=1``).

Every message is dropped. The log says only how many were dropped, never a subject, an address or a
body: a password-reset link or a sign-in code must not end up in the server's log, which is what the
development default (Django's console backend) would do."""

from __future__ import annotations

import logging

from django.core.mail.backends.base import BaseEmailBackend

log = logging.getLogger("anchorgpu.mail")


class DiscardingBackend(BaseEmailBackend):
    def send_messages(self, email_messages) -> int:
        count = len(list(email_messages or []))
        if count:
            log.info("%d e-mail(s) not sent: this shop sends no e-mail (ANCHORGPU_EMAIL_DISABLED)", count)
        return count
