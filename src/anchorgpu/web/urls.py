from django.urls import path

from . import views

urlpatterns = [
    path("", views.catalog, name="catalog"),
    path("products/<slug:slug>/", views.product_detail, name="product"),
]
