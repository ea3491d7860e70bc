"""Chain adapters: what a node or a block explorer says about transfers to
the shop's deposit addresses, checked and turned into plain observations.

No Django here. The payment services (``anchorgpu.payments.watch``) decide
what an observation means for an order; an adapter only reports, and raises
``ChainUnavailable`` rather than guess when its source is down or talks
nonsense.
"""
