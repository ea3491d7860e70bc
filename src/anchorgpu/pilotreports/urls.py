from django.urls import path

from . import views

urlpatterns = [
    path("", views.pilot_reports, name="pilot_reports"),
    path("<uuid:report_id>/", views.pilot_report, name="pilot_report"),
]
