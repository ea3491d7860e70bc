"""Invoice and credit-note downloads for the customer who owns the order."""

urlpatterns: list = []
