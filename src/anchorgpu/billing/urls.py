"""Invoice and credit-note downloads for the customer who owns the order."""

from django.urls import path

from . import views

urlpatterns = [
    path("invoice.pdf", views.invoice_pdf, name="invoice_pdf"),
    path("credit-notes/<str:number>.pdf", views.credit_note_pdf, name="credit_note_pdf"),
]
