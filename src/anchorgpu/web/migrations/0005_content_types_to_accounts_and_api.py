# The content types of the models that left ``web`` (0004) take their new app label, keeping their ids: the
# operators' permissions on them (and the admin's log entries) point at those ids and so stay attached.
#
# If the new label already has a content type (``migrate`` runs post_migrate, which makes one for each model it
# knows, e.g. after ``migrate accounts 0001``), that newer one is folded into the old one: its permissions join the
# old ones (the users and groups granted one keep it), whatever else points at it points at the old one, and it
# goes. Backwards is the same move the other way.

from django.db import migrations

MOVED = {
    'accounts': ('apitoken', 'twofactordevice', 'recoverycode', 'savedkey'),
    'api': ('apiidempotency',),
}


def _pointing_at_content_types(apps):
    """(model, field) for every foreign key to a content type in this state (permissions, admin log entries)."""
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if field.is_relation and field.related_model._meta.label_lower == 'contenttypes.contenttype':
                yield model, field


def _grant_moves(Permission, source, target):
    """Every user and group granted ``source`` is granted ``target`` instead (once)."""
    for relation in Permission._meta.related_objects:
        if not relation.many_to_many:
            continue
        through = relation.through._default_manager
        to_permission, to_holder = relation.field.m2m_reverse_field_name(), relation.field.m2m_field_name()
        holding = through.filter(**{to_permission: target}).values(to_holder)
        through.filter(**{to_permission: source}).exclude(**{f'{to_holder}__in': holding}).update(
            **{to_permission: target})


def _fold(apps, *, keep, drop):
    Permission = apps.get_model('auth', 'Permission')
    for permission in Permission._default_manager.filter(content_type=drop):
        twin = Permission._default_manager.filter(content_type=keep, codename=permission.codename).first()
        if twin is None:
            permission.content_type = keep
            permission.save(update_fields=['content_type'])
        else:
            _grant_moves(Permission, permission, twin)
            permission.delete()
    for model, field in _pointing_at_content_types(apps):
        if model is not Permission:
            model._base_manager.filter(**{field.name: drop}).update(**{field.name: keep})
    drop.delete()


def _move(apps, *, to_new: bool):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    for new_label, models in MOVED.items():
        source, target = ('web', new_label) if to_new else (new_label, 'web')
        for name in models:
            moving = ContentType._default_manager.filter(app_label=source, model=name).first()
            if moving is None:
                continue
            there = ContentType._default_manager.filter(app_label=target, model=name).first()
            if there is not None:
                _fold(apps, keep=moving, drop=there)
            moving.app_label = target
            moving.save(update_fields=['app_label'])
    ContentType._default_manager.clear_cache()


def forwards(apps, schema_editor):
    _move(apps, to_new=True)


def backwards(apps, schema_editor):
    _move(apps, to_new=False)


class Migration(migrations.Migration):

    dependencies = [
        ('web', '0004_models_to_accounts_and_api'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
