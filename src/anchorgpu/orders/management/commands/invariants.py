"""``anchorgpu invariants``: scan the database for orders without their cards and transactions credited twice."""

from django.core.management.base import BaseCommand, CommandError

from anchorgpu.orders.invariants import invariant_violations


class Command(BaseCommand):
    help = ("Scan the whole database for an order that is paid, preparing access or active without a live "
            "booking, two live bookings on one card, and a transaction credited to two orders without a "
            "statement. Exits with status 1 when anything is found.")

    def handle(self, *args, **options):
        found = invariant_violations()
        for line in found:
            self.stderr.write(line)
        if found:
            raise CommandError(f"{len(found)} problem(s) found")
        self.stdout.write("The invariants hold: every order has its cards, every transfer credits one order.")
