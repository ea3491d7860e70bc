from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PlannerPagesConfig(AppConfig):
    name = "anchorgpu.planner_pages"
    label = "planner_pages"
    verbose_name = _("Memory planner")
