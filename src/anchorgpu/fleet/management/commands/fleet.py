"""``anchorgpu fleet discover HOST [--dry-run]`` and ``anchorgpu fleet pin-host-key HOST [--yes]``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from anchorgpu.fleet import discovery, host_keys
from anchorgpu.fleet.models import Host
from anchorgpu.fleet.ssh import SSHError


def _host(name: str) -> Host:
    host = Host.objects.select_related("product").filter(name=name).first()
    if host is None:
        known = ", ".join(Host.objects.order_by("name").values_list("name", flat=True)[:20])
        raise CommandError(f"no host named {name!r}" + (f" (hosts: {known})" if known else " (the fleet is empty)"))
    return host


class Command(BaseCommand):
    help = "Fleet tools: read a host's inventory over SSH, pin a host's SSH key."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        d = sub.add_parser("discover", help="read the host's cards, topology, CPU, memory, disk and images and "
                                           "reconcile its devices")
        d.add_argument("host", help="the host's name")
        d.add_argument("--dry-run", action="store_true", help="read and report, write nothing")
        p = sub.add_parser("pin-host-key", help="fetch the key the host offers and pin it after you confirm")
        p.add_argument("host", help="the host's name")
        p.add_argument("--yes", action="store_true",
                       help="pin the key shown: only after comparing its fingerprint with the host's own")

    def handle(self, *args, **options):
        host = _host(options["host"])
        if options["action"] == "discover":
            return self._discover(host, dry_run=options["dry_run"])
        return self._pin(host, yes=options["yes"])

    def _discover(self, host: Host, *, dry_run: bool) -> None:
        try:
            result = discovery.host_discover(host=host, actor="cli", dry_run=dry_run)
        except discovery.DiscoveryError as exc:
            raise CommandError(f"{host.name}: {exc.message}") from None
        inv = result.inventory
        for card in inv.get("cards") or []:
            self.stdout.write(f"gpu{card['index']}  {card['uuid']}  {card['name']}  {card.get('pci_bus_id', '')}  "
                              f"{card.get('memory_mib') or '?'} MiB")
        self.stdout.write(f"driver {inv.get('driver_version') or '?'}; {inv.get('cpu_count') or '?'} CPUs "
                          f"{inv.get('cpu_model') or ''}; NVLink pairs: "
                          f"{', '.join(f'{a}-{b}' for a, b, _n in inv.get('nvlink') or []) or 'none'}")
        ch = result.changes
        self.stdout.write(f"devices created {len(ch.get('created', []))}, updated {len(ch.get('updated', {}))}, "
                          f"removed {len(ch.get('deleted', []))}" + (" (dry run: nothing written)" if dry_run else ""))
        for problem in result.problems:
            self.stdout.write(f"problem: {problem}")
        if not dry_run:
            self.stdout.write(f"{host.name}: " + (f"NOT SOLD: {result.host.sale_block}" if result.host.sale_block
                                                  else "sold"))

    def _pin(self, host: Host, *, yes: bool) -> None:
        try:
            key = host_keys.fetch_host_key(address=host.ssh_address, port=host.ssh_port)
        except SSHError as exc:
            raise CommandError(f"{host.name}: {exc}") from None
        self.stdout.write(f"{host.name} ({host.ssh_address}:{host.ssh_port}) offers {key.get_name()} "
                          f"{host_keys.fingerprint(key)}")
        if not yes:
            self.stdout.write("Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host "
                              "itself, then run this again with --yes to pin it. Nothing was stored.")
            return
        host_keys.host_pin_key(host=host, key=host_keys.key_line(key), actor="cli")
        self.stdout.write(f"pinned for {host.name}")
