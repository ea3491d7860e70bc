"""Validation of what customers send: one form per request shape, shared
by the pages and the JSON API so both give the same messages."""

from __future__ import annotations

from datetime import UTC

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from anchorgpu.allocation.rules import StartProblem, start_problem
from anchorgpu.catalog.models import TERM_CHOICES, Environment, Option, Product
from anchorgpu.catalog.rules import MAX_QUANTITY, environment_fits


def checked_start(start, *, past: str):
    """A start a customer typed, as UTC, inside the booking horizon; ``past`` is
    the message for a start already gone."""
    if start is None:
        return None
    try:
        start = start.astimezone(UTC)  # any offset the parser took, as UTC
    except (OverflowError, ValueError):  # the edge of the calendar, e.g. year 9999 with a negative offset
        raise forms.ValidationError(_("That start is outside the dates we can book.")) from None
    horizon = settings.ANCHORGPU_BOOKING_HORIZON_DAYS
    problem = start_problem(start, now=timezone.now(), horizon_days=horizon)
    if problem is StartProblem.PAST:
        raise forms.ValidationError(past)
    if problem is StartProblem.BEYOND_HORIZON:
        raise forms.ValidationError(_("Bookings can start at most %(days)d days ahead.") % {"days": horizon})
    return start


class OfferQueryForm(forms.Form):
    """Quantity, term and an optional earliest start for the live catalog."""

    quantity = forms.IntegerField(
        label=_("Quantity"), min_value=1, max_value=MAX_QUANTITY, initial=1,
        help_text=_("Cards, or lots for the B200."),
        error_messages={"invalid": _("Quantity must be a whole number."),
                        "min_value": _("Quantity must be at least %(limit_value)s."),
                        "max_value": _("Quantity must be at most %(limit_value)s.")})
    term = forms.TypedChoiceField(
        label=_("Term"), choices=TERM_CHOICES, coerce=int, initial=7,
        error_messages={"invalid_choice": _("Terms are 3, 7 or 30 days; %(value)s is not one of them.")})
    start = forms.DateTimeField(
        label=_("Earliest start (UTC)"), required=False,
        help_text=_("Leave empty to start as soon as possible."),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        error_messages={"invalid": _("Give the start as a date and time, e.g. 2026-12-01T09:00Z.")})
    environment = forms.SlugField(label=_("Software environment"), required=False)

    defaults = {"quantity": 1, "term": 7}

    multi_value_fields: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query, *, strict: bool, **form_kwargs):
        """Bind to a query string. Missing fields take their defaults; in
        strict mode (the API) unknown parameters are errors. A parameter may
        be repeated only if it takes several values (then also comma-separated)."""
        data, problems = {}, []
        for key in query:
            values = query.getlist(key)
            if key not in cls.base_fields:
                if strict:
                    problems.append(_("Unknown parameter “%(name)s”.") % {"name": key[:40]})
            elif key in cls.multi_value_fields:
                data[key] = [part for value in values for part in value.split(",") if part]
            elif len(values) > 1:
                problems.append(_("The parameter “%(name)s” is given more than once.") % {"name": key[:40]})
            else:
                data[key] = values[0]
        for key, value in cls.defaults.items():
            if data.get(key) in (None, ""):
                data[key] = value
        form = cls(data, **form_kwargs)
        form.query_problems = problems
        return form

    def clean_start(self):
        return checked_start(self.cleaned_data.get("start"),
                             past=_("The start is in the past; leave it empty to start as soon as possible."))

    def clean_environment(self):
        slug = self.cleaned_data.get("environment")
        if not slug:
            return None
        env = Environment.objects.filter(slug=slug, is_active=True).first()
        if env is None:
            raise forms.ValidationError(_("Unknown software environment “%(slug)s”.") % {"slug": slug})
        return env

    def clean(self):
        cleaned = super().clean()
        for problem in getattr(self, "query_problems", []):
            self.add_error(None, problem)
        return cleaned

    def query_key(self) -> tuple:
        """A valid query, normalised, for the answer cache (anchorgpu.catalog.answer_cache): what the
        offers read of it; the environment by the name and stack they check it with."""
        data, env = self.cleaned_data, self.cleaned_data["environment"]
        return (data["term"], data["quantity"], data["start"].isoformat() if data["start"] else None,
                (env.slug, env.name, env.stack) if env is not None else None)


class ProductQueryForm(OfferQueryForm):
    """The same for one product, with the environment checked against its stack and options priced."""

    options = forms.MultipleChoiceField(required=False)  # choices set per request
    multi_value_fields = ("options",)

    def __init__(self, *args, product: Product, **kwargs):
        super().__init__(*args, **kwargs)
        self.product = product
        if product.cards_per_unit > 1:
            self.fields["quantity"].label = _("Lots")
            self.fields["quantity"].help_text = _("Each lot is %(n)d cards joined by NVLink on one host.") % {
                "n": product.cards_per_unit}
        else:
            self.fields["quantity"].label = _("Cards")
            self.fields["quantity"].help_text = ""
        # The list offers only what runs on this card; anything else typed
        # into the query string is refused in clean_environment with the reason.
        fitting = [(e.slug, gettext(e.name)) for e in Environment.objects.filter(is_active=True)
                   if environment_fits(product.stack, e.stack)]
        self.fields["environment"] = forms.CharField(
            label=_("Software environment"), required=False, max_length=50,
            widget=forms.Select(choices=[("", _("Choose later"))] + fitting))
        self.fields["options"] = forms.MultipleChoiceField(
            label=_("Options"), required=False, widget=forms.CheckboxSelectMultiple,
            choices=[(o.slug, gettext(o.name)) for o in Option.objects.filter(is_active=True)],
            error_messages={"invalid_choice": _("Unknown option “%(value)s”.")})

    def clean_environment(self):
        env = super().clean_environment()
        if env is not None and not environment_fits(self.product.stack, env.stack):
            raise forms.ValidationError(
                _("The environment “%(env)s” is built for %(env_stack)s and cannot run on %(product)s (%(stack)s).")
                % {"env": env.name, "env_stack": env.get_stack_display(), "product": self.product.name,
                   "stack": self.product.get_stack_display()})
        return env

    def clean_options(self):
        options = self.cleaned_data.get("options") or []
        if len(set(options)) != len(options):
            raise forms.ValidationError(_("An option is listed twice."))
        return options
