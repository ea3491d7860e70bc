"""The domain core stays free of Django: it imports and runs without it."""

import subprocess
import sys

PURE_MODULES = [
    "anchorgpu.messages", "anchorgpu.allocation.periods", "anchorgpu.allocation.units", "anchorgpu.allocation.search",
    "anchorgpu.allocation.placement", "anchorgpu.allocation.rules", "anchorgpu.allocation.slide",
    "anchorgpu.catalog.rules", "anchorgpu.catalog.pricing", "anchorgpu.billing.tax",
    "anchorgpu.billing.credit_rule",
    "anchorgpu.orders.states", "anchorgpu.orders.rules", "anchorgpu.orders.ssh_keys", "anchorgpu.orders.provisioning",
    "anchorgpu.payments.evaluation", "anchorgpu.payments.amounts", "anchorgpu.payments.addresses",
    "anchorgpu.payments.txids", "anchorgpu.payments.address_check", "anchorgpu.payments.uri",
    "anchorgpu.payments.refund_units",
    "anchorgpu.accounts.totp",
    "anchorgpu.planner.model_spec", "anchorgpu.planner.presets", "anchorgpu.planner.setup", "anchorgpu.planner.params",
    "anchorgpu.planner.activations", "anchorgpu.planner.analytic", "anchorgpu.planner.recommend",
    "anchorgpu.planner.measured", "anchorgpu.planner.term", "anchorgpu.planner.run_cost", "anchorgpu.planner.purpose",
    "anchorgpu.planner.throughput_estimate", "anchorgpu.pilot.report_schema", "anchorgpu.simulations.child",
    "anchorgpu.chains.base", "anchorgpu.chains.rpc", "anchorgpu.chains.evm", "anchorgpu.chains.bitcoin",
    "anchorgpu.chains.http", "anchorgpu.chains.esplora", "anchorgpu.chains.tron_address", "anchorgpu.chains.keys",
    "anchorgpu.chains.tron",
    "anchorgpu.json_depth", "anchorgpu.pilot.stack", "anchorgpu.pilot.stack_rules", "anchorgpu.pilot.topology", "anchorgpu.pilot.check_report",
    "anchorgpu.fleet.inventory_parse", "anchorgpu.fleet.card_match", "anchorgpu.fleet.driver_compat",
    "anchorgpu.access.containers", "anchorgpu.access.health",
]


def test_domain_modules_import_without_django():
    code = ("import sys\n"
            f"for name in {PURE_MODULES!r}:\n"
            "    __import__(name)\n"
            "leaked = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
            "print(','.join(leaked))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"Django imported by the domain core: {done.stdout.strip()}"
