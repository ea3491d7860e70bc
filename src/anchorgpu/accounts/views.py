"""Customer accounts: the sign-up view and the password reset view (with its own form and e-mail); their
refusals when the rate limit is reached."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters

from anchorgpu.ops.ratelimit import RateLimited, refused_page

from .forms import EMAIL_MAX_LENGTH, NAME_MAX_LENGTH, EmailPasswordResetForm, SignupForm


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
