"""The pages of two-factor sign-in: the log-in's password step (which, for an
account with two-factor on, or one under attack (``login_guard``), signs nobody
in yet), the code step (or, after a wrong password under attack, its decoy), and
the operator's page to set it up, make new recovery codes or turn it off. Every
code checked takes a slot of the two-factor limit first (``rate_take``); a right
code gives it back."""

from __future__ import annotations

import time

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import Http404
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters

from anchorgpu.ops.ratelimit import RateLimited, rate_give_back, rate_keep, rate_note, rate_take, refused_page
from anchorgpu.payments.uri import qr_svg

from . import login_guard, totp
from .forms import EmailLoginForm
from .models import TwoFactorDevice
from .two_factor import (
    SESSION_VERIFIED,
    admin_requires_two_factor,
    confirmed_device,
    provisioning_uri,
    recovery_codes_left,
    recovery_codes_renew,
    session_is_verified,
    session_mark_verified,
    two_factor_confirm,
    two_factor_disable,
    two_factor_restart,
    two_factor_start,
    two_factor_verify,
)
from .views import safe_next

PENDING = "two_factor_pending"  # the password step passed: who, with which backend, until when
PENDING_SECONDS = 600


class CodeForm(forms.Form):
    code = forms.CharField(
        label=gettext_lazy("Code"), max_length=40, strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True, "spellcheck": "false",
                                      "autocapitalize": "off"}))

    def __init__(self, *args, recovery: bool = True, by_email: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.recovery, self.by_email = recovery and not by_email, by_email
        if by_email:
            self.fields["code"].help_text = gettext_lazy("The 6-digit code we have just sent you by e-mail.")
        else:
            self.fields["code"].help_text = (
                gettext_lazy("The 6-digit code your authenticator app shows now, or one of your recovery codes.")
                if recovery else gettext_lazy("The 6-digit code your authenticator app shows now."))

    def clean_code(self):
        text = self.cleaned_data["code"]
        if totp.clean_code(text) is not None or (self.recovery and totp.clean_recovery_code(text) is not None):
            return text
        if self.by_email:
            raise forms.ValidationError(_("Enter the 6 digits from the e-mail we sent you."), code="format")
        if self.recovery:
            raise forms.ValidationError(_("Enter the 6 digits from your authenticator app, or a recovery code "
                                          "(12 letters and digits, like abcd-efgh-jkmn)."), code="format")
        raise forms.ValidationError(_("Enter the 6 digits from your authenticator app."), code="format")

    def refuse(self):
        if self.by_email:
            self.add_error("code", forms.ValidationError(
                _("This code is not the one we sent. Check the latest e-mail from us, or log in again for a new "
                  "code."), code="wrong"))
            return
        self.add_error("code", forms.ValidationError(
            _("This code is not right, or it was already used. Enter the code your app shows now (it changes every "
              "30 seconds), or wait for the next one."), code="wrong"))


class LoginView(auth_views.LoginView):
    """The password step. An account with two-factor on is not signed in here: the session only remembers
    that the password was right, for a few minutes, and the code step finishes the sign-in. Each attempt takes
    a slot of the address's limit (refused past it) and notes one of the account's (never refused) before the
    password is checked. Under attack (the account's windows full, a browser that is not its known device),
    right and wrong passwords get the same answer (``login_guard``): the code step, real or a decoy, or the
    same 429; otherwise a right password gives both slots back."""

    template_name = "accounts/login.html"
    authentication_form = EmailLoginForm

    def post(self, request, *args, **kwargs):
        username = login_guard.typed_username(request)
        self.account = login_guard.account_for(username)
        self.known_device = login_guard.device_known(request, self.account)
        try:
            if self.known_device:  # its owner is not held up by others' failures at the address; this one counts
                self.taken, _full = rate_note(request, "login", undecided=True)
            else:  # the address's slot: refused past its limit (failures only: a right password gives it back)
                self.taken = rate_take(request, "login", settle=login_guard.LOGIN_SETTLE_SECONDS)
        except RateLimited as exc:
            minutes = _minutes(exc.retry_after)
            return self._refused(exc, ngettext("Too many failed log-ins came from your IP address. Try again in "
                                               "%(minutes)d minute.", "Too many failed log-ins came from your "
                                               "IP address. Try again in %(minutes)d minutes.", minutes)
                                 % {"minutes": minutes})
        try:
            return self._post_counted(request, username, *args, **kwargs)
        finally:
            rate_keep(self.taken)  # not given back: not a right password (or one still to pass its code step)

    def _post_counted(self, request, username: str, *args, **kwargs):
        # The account's slot, never refused: whether its windows were full decides the answer below.
        self.account_taken, wait = rate_note(request, "login_account")
        self.guarded = wait > 0 and not self.known_device
        # Under attack, what follows depends on the name typed, never on the password.
        self.guarded_totp = self.guarded and confirmed_device(self.account) is not None
        self.rate_as = login_guard.decoy_rate_as(self.account, username)
        if self.guarded and not self.guarded_totp:
            if login_guard.email_off():
                minutes = _minutes(wait)
                return self._refused(RateLimited(wait), ngettext(
                    "Too many wrong passwords were tried on this account recently. To protect it, signing in now "
                    "needs a code sent by e-mail, and this shop sends none: try again in %(minutes)d minute.",
                    "Too many wrong passwords were tried on this account recently. To protect it, signing in now "
                    "needs a code sent by e-mail, and this shop sends none: try again in %(minutes)d minutes.",
                    minutes) % {"minutes": minutes})
            try:
                rate_take(request, "login_code_email")  # right password or wrong: the answers stay the same
            except RateLimited as exc:
                minutes = _minutes(exc.retry_after)
                return self._refused(exc, ngettext(
                    "Too many wrong passwords were tried on this account recently, and we have sent as many "
                    "sign-in codes by e-mail as we may for now. Try again in %(minutes)d minute.",
                    "Too many wrong passwords were tried on this account recently, and we have sent as many "
                    "sign-in codes by e-mail as we may for now. Try again in %(minutes)d minutes.",
                    minutes) % {"minutes": minutes})
        return super().post(request, *args, **kwargs)

    def _refused(self, exc: RateLimited | None, text: str, status: int = 429):
        """The log-in page again with what was typed (the password is never shown back) and why."""
        form = self.get_form_class()(self.request, initial={"username": self.request.POST.get("username", "")})
        response = self.render_to_response(self.get_context_data(form=form, refused=text))
        response.status_code = status
        if exc is not None:
            response["Retry-After"] = str(exc.retry_after)
        return response

    def form_valid(self, form):
        user = form.get_user()
        if not self.guarded:
            rate_give_back(self.taken + self.account_taken)  # a right password is not a failed log-in
            if confirmed_device(user) is None:
                response = super().form_valid(form)
                login_guard.device_remember(response, user)
                return response
        pending = {"user": user.pk, "backend": user.backend, "hash": user.get_session_auth_hash(),
                   "until": time.time() + PENDING_SECONDS, "next": self.get_redirect_url(),
                   "guarded": self.guarded, "by_email": self.guarded and not self.guarded_totp,
                   "taken": self.taken + self.account_taken if self.guarded else []}
        if pending["by_email"]:
            login_guard.email_code_send(user=user, pending=pending)  # not sent: logged, the page is the same
        return self._code_step(pending)

    def form_invalid(self, form):
        if self.guarded and form.has_error(NON_FIELD_ERRORS, "invalid_login"):
            return self._code_step({  # a wrong password: the same answer as a right one, and a dead end
                login_guard.DECOY: True, "rate_as": self.rate_as, "until": time.time() + PENDING_SECONDS,
                "guarded": True, "by_email": not self.guarded_totp})
        return super().form_invalid(form)

    def _code_step(self, pending: dict):
        request = self.request
        if request.user.is_authenticated:
            logout(request)  # nobody stays signed in in this browser while the code is asked for
        else:
            request.session.cycle_key()
        request.session[PENDING] = pending
        return redirect("login_code")


def _minutes(seconds: int) -> int:
    return max(1, -(-seconds // 60))


def _pending(request) -> dict | None:
    pending = request.session.get(PENDING)
    if not isinstance(pending, dict) or pending.get("until", 0) < time.time():
        return None
    return pending


def _pending_user(request):
    """The user whose password step this session passed, if that is recent and their password unchanged."""
    pending = _pending(request)
    if pending is None or pending.get(login_guard.DECOY):
        return None
    user = get_user_model()._default_manager.filter(pk=pending.get("user"), is_active=True).first()
    if user is None or user.get_session_auth_hash() != pending.get("hash"):
        return None
    return user


def _to_login(request):
    request.session.pop(PENDING, None)
    return redirect("login")


@sensitive_post_parameters("code")
@csrf_protect
@never_cache
def login_code(request):
    """The code step: after the password step, or for a session signed in before its user turned two-factor on.
    After a wrong password under attack, a decoy: the same page, every code refused as a wrong one is."""
    step, pending = _pending(request), _pending_user(request)
    decoy = step if step is not None and step.get(login_guard.DECOY) else None
    if pending is not None:
        user, target = pending, request.session[PENDING].get("next") or ""
    elif decoy is not None:
        user, target = None, ""
    elif request.user.is_authenticated and not session_is_verified(request) and confirmed_device(request.user):
        user, target = request.user, safe_next(request) or ""
    elif request.user.is_authenticated:
        return redirect(safe_next(request) or resolve_url(settings.LOGIN_REDIRECT_URL))
    else:
        return _to_login(request)
    step = step if pending is not None or decoy is not None else {}
    by_email = bool(step.get("by_email"))
    if not by_email and decoy is None and confirmed_device(user) is None:  # turned off since the password step
        return _to_login(request)
    form, status = CodeForm(by_email=by_email), 200
    if request.method == "POST":
        try:  # before the check; a right code gives it back
            taken = rate_take(request, "two_factor",
                              user=login_guard.RateAs(decoy["rate_as"]) if decoy is not None else user)
        except RateLimited as exc:
            return refused_page(request, exc)
        form = CodeForm(request.POST, by_email=by_email)
        if form.is_valid():
            code = form.cleaned_data["code"]
            if decoy is None and (login_guard.email_code_matches(user=user, pending=step, code=code) if by_email
                                  else two_factor_verify(user=user, code=code, purpose="sign-in")):
                rate_give_back(taken)
                response = redirect(target or resolve_url(settings.LOGIN_REDIRECT_URL))
                if pending is not None:
                    rate_give_back(step.get("taken") or [])  # under attack, the password step's slots too
                    backend = step["backend"]
                    request.session.pop(PENDING, None)
                    login(request, user, backend=backend)
                    login_guard.device_remember(response, user)
                if not by_email:  # an e-mailed code is not the operator's second factor
                    session_mark_verified(request, user)
                return response
            form.refuse()
        status = 400
    return render(request, "accounts/login_code.html",
                  {"form": form, "next": target if pending is None and decoy is None else "", "by_email": by_email,
                   "guarded": bool(step.get("guarded"))}, status=status)


def _page(request, device: TwoFactorDevice | None, **context):
    context = {"device": device, "required": admin_requires_two_factor(), "next": safe_next(request) or "",
               "verified": session_is_verified(request), **context}
    if device is not None and device.is_confirmed:
        context["codes_left"] = recovery_codes_left(device)
    elif device is not None:
        context["qr_svg"] = qr_svg(provisioning_uri(device))
        context["secret"] = totp.grouped(device.secret)
    context.setdefault("form", CodeForm(recovery=device is not None and device.is_confirmed))
    return render(request, "accounts/two_factor.html", context, status=context.pop("status", 200))


@sensitive_post_parameters("code")
@never_cache
@login_required
def two_factor(request):
    """An operator's two-factor set-up: the QR code and a code to confirm it; once on, new recovery codes
    or turning it off, each with a current code."""
    user = request.user
    if not user.is_staff:
        raise Http404("two-factor sign-in is for operators")
    if request.method != "POST":
        device = confirmed_device(user) or two_factor_start(user=user)
        return _page(request, device)
    action = request.POST.get("action", "")
    device = TwoFactorDevice.objects.filter(user=user).first()
    confirmed = device is not None and device.is_confirmed
    if action == "restart" and not confirmed:
        two_factor_restart(user=user)
        query = f"?{urlencode({'next': safe_next(request)})}" if safe_next(request) else ""
        return redirect(reverse("two_factor") + query)
    if action not in ({"disable", "renew"} if confirmed else {"confirm"}):
        problem = _("This page changed since you opened it; look again and repeat what you wanted.")
        return _page(request, confirmed_device(user) or two_factor_start(user=user), problem=problem, status=400)
    try:
        taken = rate_take(request, "two_factor", user=user)  # before the check; a right code gives it back
    except RateLimited as exc:
        return refused_page(request, exc)
    form = CodeForm(request.POST, recovery=confirmed)
    if not form.is_valid():
        return _page(request, device, form=form, status=400)
    code = form.cleaned_data["code"]
    if action == "confirm":
        codes = two_factor_confirm(user=user, code=code)
        if codes is not None:
            rate_give_back(taken)
            session_mark_verified(request, user)
            return _page(request, confirmed_device(user), new_codes=codes, just_enrolled=True)
    elif action == "renew":
        codes = recovery_codes_renew(user=user, code=code)
        if codes is not None:
            rate_give_back(taken)
            return _page(request, confirmed_device(user), new_codes=codes)
    elif two_factor_disable(user=user, code=code):
        rate_give_back(taken)
        request.session.pop(SESSION_VERIFIED, None)
        return _page(request, two_factor_start(user=user), turned_off=True)
    form.refuse()
    return _page(request, device, form=form, status=400)
