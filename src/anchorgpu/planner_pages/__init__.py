"""The planner's pages in the shop: the form, the estimate with every card and quantity of the catalog, and the
run plan carried to checkout. The planner itself (``anchorgpu.planner``) stays free of Django; this app is its
web side, as ``simulations`` and ``pilotreports`` hold the pages of theirs."""
