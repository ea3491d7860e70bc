import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
application = get_wsgi_application()

from anchorgpu.ops.gc_pauses import measure_pauses  # noqa: E402 - once the shop is loaded

measure_pauses()
