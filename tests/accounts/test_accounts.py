import re

import pytest
from django.contrib.auth import get_user_model
from django.core import signing

from anchorgpu.accounts import login_guard

pytestmark = pytest.mark.django_db

User = get_user_model()
PASSWORD = "Tall-Ship-Anchor-42"


def signup(client, prefix="/en", **fields):
    data = {"email": "ada@example.com", "name": "Ada", "password1": PASSWORD, "password2": PASSWORD, **fields}
    return client.post(f"{prefix}/account/signup/", data)


def make_user(email="ada@example.com", password=PASSWORD):
    return User.objects.create_user(username=email.lower(), email=email, password=password)


def reset_link(mail) -> str:
    match = re.search(r"https?://\S+?(/\w\w/account/reset/[^/\s]+/[^/\s]+/)", mail.body)
    assert match, mail.body
    return match.group(1)


def test_signup_creates_logs_in_and_redirects(client):
    response = signup(client, email="  Ada@Example.COM ")
    assert response.status_code == 302
    assert response.url == "/en/orders/"
    user = User.objects.get()
    assert user.username == "ada@example.com" and user.first_name == "Ada"
    assert user.check_password(PASSWORD)
    assert int(client.session["_auth_user_id"]) == user.pk


def test_signup_page_renders_fields_with_labels(client):
    response = client.get("/en/account/signup/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "novalidate" in html and 'for="id_email"' in html and 'autocomplete="new-password"' in html


def test_signup_name_is_optional(client):
    assert signup(client, name="").status_code == 302
    assert User.objects.get().first_name == ""


def test_duplicate_email_is_refused_case_insensitively(client):
    make_user("ada@example.com")
    response = signup(client, email="ADA@example.com")
    assert response.status_code == 400
    assert "already exists" in response.context["form"].errors["email"][0]
    assert 'aria-invalid="true"' in response.content.decode()
    assert User.objects.count() == 1


def test_duplicate_of_an_email_that_is_not_the_username(client):
    User.objects.create_user(username="operator", email="Ops@Example.com", password=PASSWORD)
    assert signup(client, email="ops@example.com").status_code == 400
    assert User.objects.count() == 1


@pytest.mark.parametrize("password1, password2", [
    ("short", "short"), ("12345678901", "12345678901"), ("password123", "password123"),
    (PASSWORD, PASSWORD + "x"), ("ada@example.com", "ada@example.com"),
])
def test_weak_or_mismatched_password_is_refused(client, password1, password2):
    response = signup(client, password1=password1, password2=password2)
    assert response.status_code == 400
    assert response.context["form"].errors["password2"]
    assert not User.objects.exists()


def test_empty_form_is_refused(client):
    response = client.post("/en/account/signup/", {})
    assert response.status_code == 400
    assert set(response.context["form"].errors) == {"email", "password1", "password2"}
    assert not User.objects.exists()


@pytest.mark.parametrize("length", [151, 255, 5000])
def test_oversized_email_is_refused(client, length):
    email = "a" * (length - len("@example.com")) + "@example.com"
    response = signup(client, email=email)
    assert response.status_code == 400
    assert response.context["form"].errors["email"]
    assert not User.objects.exists()


def test_oversized_name_is_refused(client):
    assert signup(client, name="x" * 151).status_code == 400
    assert not User.objects.exists()


def test_login_with_mixed_case_email(client):
    user = make_user()
    response = client.post("/en/account/login/", {"username": "  ADA@example.Com", "password": PASSWORD})
    assert response.status_code == 302 and response.url == "/en/orders/"
    assert int(client.session["_auth_user_id"]) == user.pk


def test_login_page_labels_the_field_email(client):
    html = client.get("/pt/account/login/").content.decode()
    assert 'type="email"' in html and 'href="/pt/account/reset/"' in html


def test_wrong_password_shows_an_error(client):
    make_user()
    response = client.post("/en/account/login/", {"username": "ada@example.com", "password": "wrong-one"})
    assert response.status_code == 200
    assert "do not match an account" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_logout_by_post_only(client):
    make_user()
    client.login(username="ada@example.com", password=PASSWORD)
    page = client.get("/en/").content.decode()
    assert 'action="/en/account/logout/"' in page and 'href="/en/orders/"' in page
    assert client.get("/en/account/logout/").status_code == 405
    response = client.post("/en/account/logout/")
    assert response.status_code == 302 and response.url == "/en/"
    assert "_auth_user_id" not in client.session


def test_nav_offers_login_and_signup_when_logged_out(client):
    page = client.get("/fr/").content.decode()
    # Each brings the customer back to the page they were on.
    assert 'href="/fr/account/login/?next=/fr/"' in page and 'href="/fr/account/signup/?next=/fr/"' in page
    assert "/account/logout/" not in page


def test_signup_follows_a_safe_next(client):
    response = signup(client, next="/en/products/h200/?term=7")
    assert response.url == "/en/products/h200/?term=7"


def test_signup_ignores_an_external_next(client):
    form = client.get("/en/account/signup/?next=https://evil.example/").content.decode()
    assert "evil.example" not in form
    response = signup(client, next="https://evil.example/")
    assert response.url == "/en/orders/"


def test_login_follows_a_safe_next_and_ignores_an_external_one(client):
    make_user()
    data = {"username": "ada@example.com", "password": PASSWORD}
    assert client.post("/en/account/login/", {**data, "next": "/en/products/h200/"}).url == "/en/products/h200/"
    client.logout()
    assert client.post("/en/account/login/", {**data, "next": "https://evil.example/"}).url == "/en/orders/"
    client.logout()
    assert client.post("/en/account/login/", {**data, "next": "//evil.example/"}).url == "/en/orders/"


def test_password_reset_round_trip(client, mailoutbox, settings):
    settings.ANCHORGPU_SITE_URL = "https://shop.example/"
    make_user("Ada@Example.com")
    response = client.post("/en/account/reset/", {"email": "ada@EXAMPLE.com"})
    assert response.status_code == 302 and response.url == "/en/account/reset/sent/"
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.to == ["Ada@example.com"] and "\n" not in mail.subject and "password" in mail.subject.lower()
    assert "https://shop.example/en/account/reset/" in mail.body
    link = reset_link(mail)
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200 and form_page.context["validlink"]
    new_password = "Deep-Harbour-Keel-77"
    done = client.post(form_page.redirect_chain[-1][0], {"new_password1": new_password, "new_password2": new_password})
    assert done.status_code == 302 and done.url == "/en/account/reset/done/"
    assert client.get(done.url).status_code == 200
    assert client.login(username="ada@example.com", password=new_password)
    assert client.get(link, follow=True).context["validlink"] is False  # used once


def test_a_shop_without_email_says_it_sends_no_reset_link(client, mailoutbox, settings):
    settings.ANCHORGPU_EMAIL_DISABLED = True
    make_user("ada@example.com")
    response = client.post("/en/account/reset/", {"email": "ada@example.com"})
    page = response.content.decode()
    assert response.status_code == 503 and "cannot send a reset link" in page and 'value="ada@example.com"' in page
    assert mailoutbox == []


def test_password_reset_link_keeps_the_language(client, mailoutbox):
    make_user()
    client.post("/pt/account/reset/", {"email": "ada@example.com"})
    assert len(mailoutbox) == 1
    assert reset_link(mailoutbox[0]).startswith("/pt/account/reset/")


def test_unknown_email_gets_the_same_page_and_no_mail(client, mailoutbox):
    make_user()
    known = client.post("/en/account/reset/", {"email": "ada@example.com"})
    unknown = client.post("/en/account/reset/", {"email": "nobody@example.com"})
    assert unknown.status_code == known.status_code == 302 and unknown.url == known.url
    assert len(mailoutbox) == 1


def test_password_change_requires_login_and_works(client):
    assert client.get("/en/account/password/").url.startswith("/en/account/login/?next=")
    make_user()
    client.login(username="ada@example.com", password=PASSWORD)
    new_password = "Deep-Harbour-Keel-77"
    response = client.post("/en/account/password/", {
        "old_password": PASSWORD, "new_password1": new_password, "new_password2": new_password})
    assert response.status_code == 302 and response.url == "/en/account/password/done/"
    assert User.objects.get().check_password(new_password)


def test_a_complete_log_in_marks_the_browser_as_a_known_device(client, settings):
    make_user()
    data = {"username": "ada@example.com", "password": PASSWORD}
    assert "anchorgpu_device" not in client.post("/en/account/login/", {**data, "password": "wrong-one"}).cookies
    cookie = client.post("/en/account/login/", data).cookies["anchorgpu_device"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and not cookie["secure"]
    assert int(cookie["max-age"]) == 90 * 24 * 3600
    held = signing.loads(cookie.value, salt=login_guard.DEVICE_SALT)  # signed, with a salt of its own
    assert held["u"] == User.objects.get().pk and set(held) == {"u", "h"}  # the user and a hash, no e-mail
    with pytest.raises(signing.BadSignature):
        signing.loads(cookie.value)
    settings.SESSION_COOKIE_SECURE = True
    client.post("/en/account/logout/")
    assert client.post("/en/account/login/", data).cookies["anchorgpu_device"]["secure"]
