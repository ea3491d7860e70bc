from django.urls import include, path

from . import checkout_price, contact, order_term, order_views, terms, views

urlpatterns = [
    path("", views.catalog, name="catalog"),
    path("products/<slug:slug>/", views.product_detail, name="product"),
    path("account/", include("anchorgpu.accounts.urls")),
    path("checkout/<slug:slug>/", order_views.checkout, name="checkout"),
    path("checkout/<slug:slug>/price/", checkout_price.checkout_price, name="checkout_price"),
    path("contact/", contact.contact, name="contact"),
    path("terms/", terms.terms, name="terms"),
    path("orders/", order_views.order_list, name="orders"),
    path("orders/<str:reference>/", order_views.order_detail, name="order"),
    path("orders/<str:reference>/paid/", order_views.order_claim_payment, name="order_claim_payment"),
    path("orders/<str:reference>/cancel/", order_views.order_cancel_view, name="order_cancel"),
    path("orders/<str:reference>/extend/", order_views.order_extend_view, name="order_extend"),
    path("orders/<str:reference>/take-start/", order_term.order_take_start, name="order_take_start"),
    path("orders/<str:reference>/refund-address/", order_views.order_refund_address, name="order_refund_address"),
    path("orders/<str:reference>/status/", order_views.order_status, name="order_status"),
    path("orders/<str:reference>/documents/", include("anchorgpu.billing.urls")),
    path("guides/", include("anchorgpu.guides.urls")),
    path("planner/", include("anchorgpu.planner_pages.urls")),
    path("planner/reports/", include("anchorgpu.pilotreports.urls")),
    path("planner/", include("anchorgpu.simulations.urls")),
]
