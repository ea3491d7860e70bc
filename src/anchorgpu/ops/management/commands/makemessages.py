"""Django's ``makemessages``, reading ``_l("…")`` too.

Modules that need both an immediate and a lazy translation import ``gettext_lazy as _l`` (the payment tools'
titles in ``orders.admin_actions``, the claim checks' texts in ``payments.transfers``). xgettext knows only
the usual names (``_``, ``gettext_lazy``, …), so without this those strings never reached the catalogues and
operators read them in English. Django documents this way of adding keywords: subclass the command and
extend ``xgettext_options``.
"""

from django.core.management.commands import makemessages


class Command(makemessages.Command):
    xgettext_options = [*makemessages.Command.xgettext_options, "--keyword=_l"]
