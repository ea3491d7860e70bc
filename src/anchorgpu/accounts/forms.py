"""Customer accounts: the email is the login. The sign-up form and the forms that the Django auth views use here
(log in, password reset)."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy as _

User = get_user_model()
# The email becomes the username, so it may be no longer than the username column.
EMAIL_MAX_LENGTH = min(254, User._meta.get_field("username").max_length)
NAME_MAX_LENGTH = User._meta.get_field("first_name").max_length


def normalize_email(value: str) -> str:
    return (value or "").strip().lower()


class SignupForm(forms.Form):
    email = forms.EmailField(
        label=_("Email"), max_length=EMAIL_MAX_LENGTH,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
        help_text=_("You log in with it, and we send your order updates to it."),
        error_messages={"max_length": _("This email is too long: at most %(limit_value)d characters.")})
    name = forms.CharField(
        label=_("Name"), required=False, max_length=NAME_MAX_LENGTH,
        widget=forms.TextInput(attrs={"autocomplete": "name"}),
        help_text=_("Optional. How we address you in emails."))
    password1 = forms.CharField(
        label=_("Password"), strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=_("At least 8 characters; not only digits, not a common password and not close to your email."))
    password2 = forms.CharField(
        label=_("Password again"), strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=_("Type the same password once more."))

    def clean_email(self):
        email = normalize_email(self.cleaned_data["email"])
        if User._default_manager.filter(username__iexact=email).exists() or \
                User._default_manager.filter(email__iexact=email).exists():
            raise forms.ValidationError(
                _("An account with this email already exists. Log in, or reset its password."), code="taken")
        return email

    def clean(self):
        cleaned = super().clean()
        password1, password2 = cleaned.get("password1"), cleaned.get("password2")
        if password1 and password2 and password1 != password2:
            self.add_error("password2", forms.ValidationError(_("The two passwords differ."), code="mismatch"))
        elif password2:
            candidate = User(username=cleaned.get("email") or "", email=cleaned.get("email") or "",
                             first_name=cleaned.get("name") or "")
            try:
                password_validation.validate_password(password2, candidate)
            except forms.ValidationError as error:
                self.add_error("password2", error)
        return cleaned

    def save(self):
        data = self.cleaned_data
        try:
            with transaction.atomic():
                return User._default_manager.create_user(
                    username=data["email"], email=data["email"], password=data["password1"],
                    first_name=data["name"].strip())
        except IntegrityError:  # the same email signed up a moment ago
            self.add_error("email", forms.ValidationError(
                _("An account with this email already exists. Log in, or reset its password."), code="taken"))
            return None


class EmailLoginForm(AuthenticationForm):
    username = forms.CharField(
        label=_("Email"), widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}))
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": _("This email and password do not match an account. Passwords are case-sensitive."),
    }

    def clean_username(self):
        return normalize_email(self.cleaned_data["username"])


class EmailPasswordResetForm(PasswordResetForm):
    email = forms.EmailField(
        label=_("Email"), max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}))
