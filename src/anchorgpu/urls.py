from django.conf import settings
from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.urls import include, path

from anchorgpu.api import urls as api_urls
from anchorgpu.ops import health, metrics
from anchorgpu.web import language_switch

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/v1/", include(api_urls.urlpatterns)),
    path("i18n/setlang/", language_switch.switch_language, name="set_language"),
    path("admin/", admin.site.urls),
]
urlpatterns += i18n_patterns(path("", include("anchorgpu.web.urls")))
if settings.ANCHORGPU_BENCH_CEILING:  # bench/load.py only; unnamed, never in production (ops/bench_ceiling.py)
    urlpatterns.append(path("", include("anchorgpu.ops.bench_ceiling")))

handler400 = "anchorgpu.web.views.bad_request"
handler404 = "anchorgpu.web.views.not_found"
handler500 = "anchorgpu.web.views.server_error"
