"""API v1 itself: the ninja API with its error answers and its operations (``catalog``, ``orders``,
``pilot_reports``). ``urls`` mounts it under the shop's own URL names and ``openapi`` reads its document
from it; neither imports the other."""

from __future__ import annotations

from ninja import NinjaAPI

from . import catalog, errors, extensions, orders, pilot_reports
from .body import JsonParser

ROUTERS = (catalog.router, orders.router, extensions.router, pilot_reports.router)


class Api(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"


api = Api(title="AnchorGPU API", version="1.0.0", urls_namespace="api-v1", openapi_url=None, docs_url=None,
          servers=[{"url": "/api/v1"}], parser=JsonParser(),
          description="Fixed-term GPU rental: the live catalog, price quotes and orders paid by crypto transfer. "
                      "Errors are always {\"error\": {\"code\", \"message\", \"fields\"}}.")
errors.install(api)
for router in ROUTERS:
    api.add_router("", router)
