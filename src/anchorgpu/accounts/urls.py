"""Customer accounts: sign up, log in (with a code step for two-factor) and out, password reset by email;
API tokens; saved SSH keys; an operator's two-factor set-up."""

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from anchorgpu.ops.ratelimit import rate_limited

from . import key_views, token_views, two_factor_views, views

urlpatterns = [
    path("signup/", rate_limited("signup", again=views.signup_refused)(views.signup), name="signup"),
    path("login/", two_factor_views.LoginView.as_view(), name="login"),  # limits failures itself
    path("login/code/", two_factor_views.login_code, name="login_code"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", auth_views.PasswordChangeView.as_view(
        template_name="accounts/password_change_form.html", success_url=reverse_lazy("password_change_done")),
        name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(
        template_name="accounts/password_change_done.html"), name="password_change_done"),
    path("reset/", rate_limited("password_reset", again=views.password_reset_refused)(
        views.PasswordResetView.as_view(success_url=reverse_lazy("password_reset_done"))), name="password_reset"),
    path("reset/sent/", auth_views.PasswordResetDoneView.as_view(
        template_name="accounts/password_reset_done.html"), name="password_reset_done"),
    path("reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(
        template_name="accounts/password_reset_confirm.html", success_url=reverse_lazy("password_reset_complete")),
        name="password_reset_confirm"),
    path("reset/done/", auth_views.PasswordResetCompleteView.as_view(
        template_name="accounts/password_reset_complete.html"), name="password_reset_complete"),
    path("tokens/", token_views.api_tokens, name="api_tokens"),
    path("keys/", key_views.ssh_keys, name="ssh_keys"),
    path("two-factor/", two_factor_views.two_factor, name="two_factor"),
]
