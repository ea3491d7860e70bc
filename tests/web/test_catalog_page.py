import pytest

from anchorgpu.demo import PRODUCTS

pytestmark = pytest.mark.django_db


def test_root_redirects_to_a_language(client, demo_shop):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/en/"


def test_catalog_lists_every_product_with_figures(client, demo_shop):
    response = client.get("/en/?quantity=2&term=30")
    assert response.status_code == 200
    html = response.content.decode()
    for _slug, name, *_ in PRODUCTS:
        assert name.replace("×", "×") in html
    assert "2 × 180 GB" in html
    assert "ROCm" in html and "Blackwell-ready" in html
    assert "30-day term" in html
    offers = response.context["offers"]
    assert {o.product.slug for o in offers} == {slug for slug, *_ in PRODUCTS}
    assert all(o.quantity == 2 and o.term_days == 30 for o in offers)


def test_htmx_request_gets_only_the_table(client, demo_shop):
    full = client.get("/en/?quantity=1&term=3")
    partial = client.get("/en/?quantity=1&term=3", headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert "<html" in full.content.decode() and "<html" not in partial.content.decode()
    assert "<table" in partial.content.decode()
    assert 'hx-get="/en/"' in full.content.decode()


def test_no_external_scripts_or_styles(client, demo_shop):
    html = client.get("/en/").content.decode()
    assert "http://" not in html and "https://" not in html
    assert "<script>" not in html  # no inline scripts


@pytest.mark.parametrize("query, field", [
    ("quantity=0", "quantity"), ("quantity=-1", "quantity"), ("quantity=5000", "quantity"),
    ("quantity=x", "quantity"), ("term=4", "term"), ("start=1999-01-01T10:00", "start"),
    ("quantity=1&quantity=3", None),
])
def test_bad_input_is_a_form_error_not_a_500(client, demo_shop, query, field):
    response = client.get("/en/?" + query)
    assert response.status_code == 400
    form = response.context["form"]
    if field:
        assert form.errors[field]
    else:
        assert form.non_field_errors()
    assert 'role="alert"' in response.content.decode()
    assert 'aria-invalid="true"' in response.content.decode() or field is None


def test_product_page_prices_and_refuses_wrong_stack(client, demo_shop):
    ok = client.get("/en/products/h200-141gb/?quantity=2&term=7&options=dedicated-ipv4")
    assert ok.status_code == 200
    html = ok.content.decode()
    assert "Term discount" in html and "Dedicated IPv4 address" in html and "Total for the term" in html
    bad = client.get("/en/products/mi300x-192gb/?environment=pytorch-cuda124")
    assert bad.status_code == 400
    assert "cannot run on MI300X" in bad.content.decode()
    assert client.get("/en/products/no-such-card/").status_code == 404
