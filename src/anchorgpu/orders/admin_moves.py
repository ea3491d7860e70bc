"""The moves of an order's term, on its admin page: read-only rows of ``Move`` (made by ``moves.order_move``)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from .models import Move


class MoveInline(admin.TabularInline):
    model = Move
    verbose_name = _("move to other cards")
    verbose_name_plural = _("moves to other cards")
    fields = ("at", "from_hosts", "to_hosts", "reason", "actor", "access_moved", "wipe_due_at", "wiped_at",
              "wipe_attempts", "wipe_error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
