"""``anchorgpu moves offer ORDER``, ``anchorgpu moves move ORDER --reason R [--cards UID,UID]`` and
``anchorgpu moves window BOOKING [--move-all --reason R]``: the operator's move tools on the command line, through
the same services as the admin."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from anchorgpu.allocation.errors import AllocationError
from anchorgpu.allocation.models import Booking
from anchorgpu.fleet.models import Device
from anchorgpu.orders.errors import OrderError
from anchorgpu.orders.maintenance import maintenance_hits, maintenance_move_all
from anchorgpu.orders.models import Order
from anchorgpu.orders.moves import move_offer, order_move


def _uids(ids) -> str:
    names = dict(Device.objects.filter(pk__in=list(ids)).values_list("pk", "uid"))
    return ", ".join(names.get(i, f"#{i}") for i in ids)


class Command(BaseCommand):
    help = "Move a term to other cards: see the shop's proposal, move one order, or move a maintenance window's hits."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        o = sub.add_parser("offer", help="the shop's proposal for an order, without moving it")
        o.add_argument("order", help="the order's reference")
        m = sub.add_parser("move", help="move an order's term to the proposal, or to the cards given")
        m.add_argument("order", help="the order's reference")
        m.add_argument("--reason", required=True, help="written to the audit log")
        m.add_argument("--cards", default="", help="stable ids of the cards to take, separated by commas")
        w = sub.add_parser("window", help="the bookings a maintenance window hits, with their proposals")
        w.add_argument("booking", type=int, help="the maintenance window's booking number")
        w.add_argument("--move-all", action="store_true", help="move every one to its proposal")
        w.add_argument("--reason", default="", help="written to the audit log (default: names the window)")

    def handle(self, *args, **options):
        action = options["action"]
        if action == "window":
            return self._window(options)
        order = Order.objects.filter(reference=options["order"].strip().upper()).first()
        if order is None:
            raise CommandError(f"no order {options['order']!r}")
        if action == "offer":
            offer = move_offer(order=order)
            if offer.possible:
                self.stdout.write(f"{order.reference}: from {offer.at:%Y-%m-%d %H:%M} UTC to "
                                  f"{_uids(offer.to_devices)} (now {_uids(offer.from_devices)})")
            else:
                self.stdout.write(f"{order.reference}: no move: {offer.reason}")
            return None
        devices = None
        uids = [u.strip() for u in options["cards"].split(",") if u.strip()]
        if uids:
            found = dict(Device.objects.filter(uid__in=uids).values_list("uid", "pk"))
            missing = [u for u in uids if u not in found]
            if missing:
                raise CommandError(f"no card {', '.join(missing)}")
            devices = [found[u] for u in uids]
        try:
            move = order_move(order=order, devices=devices, actor="cli", reason=options["reason"])
        except (AllocationError, OrderError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{order.reference}: moved from {move.from_hosts} to {move.to_hosts} at "
                          f"{move.at:%Y-%m-%d %H:%M} UTC ({_uids(move.to_devices)})")
        return None

    def _window(self, options) -> None:
        window = Booking.objects.filter(pk=options["booking"], kind=Booking.Kind.MAINTENANCE).first()
        if window is None:
            raise CommandError(f"no maintenance window #{options['booking']}")
        if options["move_all"]:
            for outcome in maintenance_move_all(window=window, actor="cli", reason=options["reason"]):
                self.stdout.write(f"#{outcome.booking.pk}: " + ("moved" if outcome.moved else
                                                                f"not moved: {outcome.error}"))
            return
        hits = maintenance_hits(window=window)
        if not hits:
            self.stdout.write("nothing to move")
        for hit in hits:
            ref = hit.order.reference if hit.order else hit.booking.reference or "—"
            what = (f"to {_uids(hit.proposal.to_devices)}" if hit.proposal.possible else hit.text)
            self.stdout.write(f"#{hit.booking.pk} {ref}: {what}")
