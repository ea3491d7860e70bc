from django.urls import path

from . import views

urlpatterns = [
    path("simulate/", views.planner_simulate, name="planner_simulate"),
    path("simulations/<uuid:job_id>/", views.planner_simulation, name="planner_simulation"),
    path("simulations/<uuid:job_id>/status/", views.planner_simulation_status, name="planner_simulation_status"),
]
