import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
application = get_wsgi_application()

from anchorgpu.ops.gc_tuning import tune  # noqa: E402 - once the shop is loaded

tune()
