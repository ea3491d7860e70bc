"""The account models and the API's idempotency keys left the ``web`` app for ``accounts`` and ``api`` (migrations
accounts 0001, api 0001, web 0004 and 0005) without touching their tables: rows made before the move are read
through the new models, and the content types move with their ids, so the operators' permissions stay attached.
A content type that post_migrate already made under the new label is folded into the old one. And back."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from anchorgpu.accounts.models import ApiToken, RecoveryCode, SavedKey, TwoFactorDevice
from anchorgpu.api.models import ApiIdempotency

OLD = ("web", "0003_saved_keys")
BEFORE = [OLD, ("accounts", None), ("api", None)]
MOVED = {"apitoken": "accounts", "twofactordevice": "accounts", "recoverycode": "accounts", "savedkey": "accounts",
         "apiidempotency": "api"}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    ContentType.objects.clear_cache()
    return executor


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _types(label: str) -> dict[str, int]:
    return dict(ContentType.objects.filter(app_label=label, model__in=MOVED).values_list("model", "id"))


def _fresh(user: User) -> User:
    return User.objects.get(pk=user.pk)  # has_perm caches what it read


@pytest.mark.django_db(transaction=True)
def test_rows_and_permissions_move_to_accounts_and_api_and_back():
    executor = _migrate(BEFORE)
    try:
        old = executor.loader.project_state([OLD]).apps
        assert sorted(_types("web")) == sorted(MOVED)  # post_migrate made them; migrating back moved them to web
        old_ids = _types("web")

        ada = User.objects.create_user("ada@example.com", "ada@example.com")
        operator = User.objects.create_user("op@example.com", "op@example.com")
        OldToken, OldDevice, OldCode, OldKey, OldIdempotency = (
            old.get_model("web", name) for name in ("ApiToken", "TwoFactorDevice", "RecoveryCode", "SavedKey",
                                                    "ApiIdempotency"))
        token = OldToken.objects.create(user_id=ada.pk, name="laptop", prefix="abcd1234", secret_hash="f" * 64)
        device = OldDevice.objects.create(user_id=operator.pk, secret="JBSWY3DPEHPK3PXP", recovery_salt="s" * 32)
        OldCode.objects.create(device_id=device.pk, code_hash="c" * 64)
        OldKey.objects.create(user_id=ada.pk, label="desk", key_type="ssh-ed25519", bits=256,
                              fingerprint="SHA256:abc", public_key="ssh-ed25519 AAAA desk")
        OldIdempotency.objects.create(user_id=ada.pk, key="k-1", fingerprint="9" * 64)

        staff = Group.objects.create(name="support")
        staff.permissions.add(Permission.objects.get(content_type_id=old_ids["apitoken"], codename="view_apitoken"))
        operator.groups.add(staff)
        operator.user_permissions.add(Permission.objects.get(content_type_id=old_ids["savedkey"],
                                                             codename="change_savedkey"))
        # What post_migrate would have made under the new label before web 0005 ran: a second content type for
        # saved keys, with a permission the old one also has (granted to the group) and one it lacks (to a user).
        early = ContentType.objects.create(app_label="accounts", model="savedkey")
        staff.permissions.add(Permission.objects.create(content_type=early, codename="view_savedkey", name="v"))
        operator.user_permissions.add(Permission.objects.create(content_type=early, codename="export_savedkey",
                                                                name="Can export saved SSH key"))
        entry = LogEntry.objects.create(user=operator, content_type=early, object_id="1", object_repr="desk",
                                        action_flag=2)

        _migrate(_latest())

        assert ApiToken.objects.get(prefix="abcd1234").user == ada
        assert TwoFactorDevice.objects.get(user=operator).recovery_codes.get().code_hash == "c" * 64
        assert RecoveryCode.objects.count() == 1
        assert SavedKey.objects.get(user=ada).fingerprint == "SHA256:abc"
        assert ApiIdempotency.objects.get(user=ada).key == "k-1"
        assert _types("web") == {}
        moved = {**_types("accounts"), **_types("api")}
        assert moved == old_ids  # the same rows, under their new labels
        assert {model: ContentType.objects.get_for_id(pk).app_label for model, pk in moved.items()} == MOVED
        assert not ContentType.objects.filter(pk=early.pk).exists()
        entry.refresh_from_db()
        assert entry.content_type_id == old_ids["savedkey"]
        assert Permission.objects.filter(content_type_id=old_ids["savedkey"], codename="view_savedkey").count() == 1
        operator = _fresh(operator)
        for permission in ("accounts.view_apitoken", "accounts.view_savedkey", "accounts.change_savedkey",
                           "accounts.export_savedkey"):
            assert operator.has_perm(permission), permission
        assert not operator.has_perm("web.view_apitoken")

        _migrate(BEFORE)

        assert _types("web") == old_ids
        assert _types("accounts") == _types("api") == {}
        assert _fresh(operator).has_perm("web.view_apitoken")
        assert _fresh(operator).has_perm("web.export_savedkey")
        assert (OldToken.objects.count(), OldCode.objects.count(), OldKey.objects.count(),
                OldIdempotency.objects.count()) == (1, 1, 1, 1)
    finally:
        _migrate(_latest())
