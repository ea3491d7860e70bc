"""A model field for crypto amounts: whole base units of any size.

Wei amounts pass 2**63 (about 9.2 ETH), so a BIGINT cannot hold them, and
SQLite would turn a NUMERIC that large into a float. The value is stored as
its decimal digits and is a Python ``int`` everywhere else.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

MAX_DIGITS = 78  # 2**256 has 78 digits: any EVM uint256


class BaseUnitsField(models.Field):
    description = _("Whole base units of a crypto asset")

    def __init__(self, *args, **kwargs):
        kwargs["max_length"] = MAX_DIGITS
        super().__init__(*args, **kwargs)

    def get_internal_type(self):
        return "CharField"  # varchar(78): exact on every database

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("max_length", None)
        return name, path, args, kwargs

    def from_db_value(self, value, expression, connection):
        return None if value is None else int(value)

    def to_python(self, value):
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip()
        if not text.isdigit():
            raise ValidationError(_("Give a whole number of base units (digits only)."), code="invalid")
        return int(text)

    def get_prep_value(self, value):
        value = self.to_python(value)
        if value is None:
            return None
        if value < 0:
            raise ValueError("base units cannot be negative")
        return str(value)

    def formfield(self, **kwargs):
        from django import forms

        return forms.IntegerField(min_value=0, max_value=10**MAX_DIGITS - 1, **kwargs)
