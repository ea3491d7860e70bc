"""Customer accounts: the email is the login. The sign-up view and the forms
that the Django auth views use here (log in, password reset)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login, password_validation
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm
from django.db import IntegrityError, transaction
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters

from anchorgpu.ops.ratelimit import RateLimited, refused_page

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


class PasswordResetView(auth_views.PasswordResetView):
    """Our own email; the link uses the shop's public address and the
    language prefix of the page the customer asked from."""

    form_class = EmailPasswordResetForm
    template_name = "accounts/password_reset_form.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"

    def form_valid(self, form):
        if getattr(settings, "ANCHORGPU_EMAIL_DISABLED", False):  # no "we sent you a link" that nobody sends
            form.add_error(None, _("This shop sends no e-mail, so it cannot send a reset link. Write to the shop's "
                                   "staff from your account's address to have the password reset."))
            response = self.form_invalid(form)
            response.status_code = 503
            return response
        self.extra_email_context = {"site_url": settings.ANCHORGPU_SITE_URL.rstrip("/")}
        return super().form_valid(form)


def signup_refused(request, exc: RateLimited):
    """Too many sign-ups from this address: the form again with the e-mail and name typed (never a password)."""
    form = SignupForm(initial={"email": request.POST.get("email", "")[:EMAIL_MAX_LENGTH],
                               "name": request.POST.get("name", "")[:NAME_MAX_LENGTH]})
    return refused_page(request, exc, template="accounts/signup.html",
                        context={"form": form, "next": safe_next(request) or ""})


def password_reset_refused(request, exc: RateLimited):
    form = EmailPasswordResetForm(initial={"email": request.POST.get("email", "")[:254]})
    return refused_page(request, exc, template="accounts/password_reset_form.html", context={"form": form})


def safe_next(request) -> str | None:
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return None


@sensitive_post_parameters("password1", "password2")
@csrf_protect
@never_cache
def signup(request):
    if request.method == "POST":
        form = SignupForm(request.POST)
        user = form.save() if form.is_valid() else None
        if user is not None:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect(safe_next(request) or resolve_url(settings.LOGIN_REDIRECT_URL))
        status = 400
    else:
        form, status = SignupForm(), 200
    return render(request, "accounts/signup.html", {"form": form, "next": safe_next(request) or ""}, status=status)
