"""Shared pieces of the operators' admin."""

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _


class BoundedDateChangeList(ChangeList):
    """Django's list, whose date filter (``date_hierarchy``) turns a year it cannot count past (9999-12-31 and
    its next day, or 9999 and its next year) into a bad filter, as it does a date that does not exist: the
    list again with "?e=1", not a 500."""

    def get_filters(self, request):
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:
            raise IncorrectLookupParameters(exc) from exc


class BoundedDatesAdmin(admin.ModelAdmin):
    """For a list with a date filter (``date_hierarchy``): see ``BoundedDateChangeList``."""

    def get_changelist(self, request, **kwargs):
        return BoundedDateChangeList


class ReadOnlyModelAdmin(BoundedDatesAdmin):
    """Shown to operators, never added, edited or deleted here: these rows
    change only through services (or not at all, like the audit log)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def missing_object_redirect(model_admin: admin.ModelAdmin, request, opts, object_id) -> HttpResponseRedirect:
    """What our own admin pages (an order's payment tools, a booking's release, a host's maintenance) answer
    when the row in the address is not there: a warning on the admin's index, as Django's change page does.

    Django's admin does this with a private method (``ModelAdmin._get_obj_does_not_exist_redirect``) that may
    change in any release, so this is built from public parts only: ``message_user``, ``unquote`` (documented
    in ``django.contrib.admin.utils``' use by the admin's URLs) and the ``admin:index`` URL name. The message
    keeps Django's msgid on purpose, and our catalogues word it as Django's own do in every language we serve."""
    text = _("%(name)s with ID “%(key)s” doesn’t exist. Perhaps it was deleted?") % {
        "name": opts.verbose_name, "key": unquote(str(object_id))}
    model_admin.message_user(request, text, messages.WARNING)
    return HttpResponseRedirect(reverse("admin:index", current_app=model_admin.admin_site.name))
