"""Customer accounts: sign up, log in and out, password reset by email."""

urlpatterns: list = []
