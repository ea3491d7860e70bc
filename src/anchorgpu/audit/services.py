from __future__ import annotations

from typing import Any

from .models import AuditEntry

SYSTEM = "system"


def audit_record(*, actor: str, action: str, obj: Any, from_state: str = "", to_state: str = "",
                 reason: str = "", data: dict | None = None) -> AuditEntry:
    return AuditEntry.objects.create(
        actor=actor or SYSTEM,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        from_state=from_state,
        to_state=to_state,
        reason=reason,
        data=data or {},
    )
