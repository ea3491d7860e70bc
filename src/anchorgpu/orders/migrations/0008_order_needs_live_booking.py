"""No order is paid, preparing access or active without a live, confirmed booking of its own (DESIGN §4),
enforced by the database itself, so that no path into the data (admin, API, worker, a shell) can give an
order's cards to another customer while the order keeps them.

Two checks, on both databases, each at the end of its statement:

* an order entering (or staying in) one of those states, or changing its booking there, must point at a
  booking that is live and confirmed (on PostgreSQL the booking row is share-locked while it is read, so a
  concurrent release waits);
* a booking that stops being live or confirmed must not belong to an order in one of those states.

The services therefore change the order first and release its booking after (``orders.lifecycle``,
``payments.refunds``). The states are ``orders.states.NEEDS_CONFIRMED_BOOKING``; ``orders.invariants``
scans for the same thing (and for what the database cannot check).
"""

from django.db import migrations

STATES = "('paid', 'provisioning', 'active')"

PG_UP = [
    f"""CREATE FUNCTION orders_order_needs_live_booking() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.state IN {STATES} AND NOT EXISTS (
          SELECT 1 FROM allocation_booking b
          WHERE b.id = NEW.booking_id AND b.state = 'live' AND b.kind = 'confirmed' FOR SHARE) THEN
        RAISE EXCEPTION 'order_needs_live_booking: order % is % without a live confirmed booking',
          NEW.reference, NEW.state USING ERRCODE = '23514';
      END IF;
      RETURN NULL;
    END $$""",
    """CREATE CONSTRAINT TRIGGER order_needs_live_booking AFTER INSERT OR UPDATE OF state, booking_id
       ON orders_order FOR EACH ROW EXECUTE FUNCTION orders_order_needs_live_booking()""",
    f"""CREATE FUNCTION allocation_booking_keeps_its_order() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF (NEW.state <> 'live' OR NEW.kind <> 'confirmed') AND EXISTS (
          SELECT 1 FROM orders_order o WHERE o.booking_id = NEW.id AND o.state IN {STATES}) THEN
        RAISE EXCEPTION 'order_needs_live_booking: booking % still holds the cards of an order that needs them',
          NEW.id USING ERRCODE = '23514';
      END IF;
      RETURN NULL;
    END $$""",
    """CREATE CONSTRAINT TRIGGER booking_keeps_its_order AFTER UPDATE OF state, kind
       ON allocation_booking FOR EACH ROW EXECUTE FUNCTION allocation_booking_keeps_its_order()""",
]
PG_DOWN = [
    "DROP TRIGGER IF EXISTS booking_keeps_its_order ON allocation_booking",
    "DROP FUNCTION IF EXISTS allocation_booking_keeps_its_order()",
    "DROP TRIGGER IF EXISTS order_needs_live_booking ON orders_order",
    "DROP FUNCTION IF EXISTS orders_order_needs_live_booking()",
]

_SQLITE_ORDER_CHECK = f"""
    WHEN NEW.state IN {STATES} AND NOT EXISTS (
        SELECT 1 FROM allocation_booking b
        WHERE b.id = NEW.booking_id AND b.state = 'live' AND b.kind = 'confirmed')
    BEGIN SELECT RAISE(ABORT, 'order_needs_live_booking: an order that needs its cards has no live booking'); END
"""
SQLITE_UP = [
    "CREATE TRIGGER order_needs_live_booking_insert AFTER INSERT ON orders_order" + _SQLITE_ORDER_CHECK,
    "CREATE TRIGGER order_needs_live_booking_update AFTER UPDATE OF state, booking_id ON orders_order"
    + _SQLITE_ORDER_CHECK,
    f"""CREATE TRIGGER booking_keeps_its_order AFTER UPDATE OF state, kind ON allocation_booking
    WHEN (NEW.state <> 'live' OR NEW.kind <> 'confirmed') AND EXISTS (
        SELECT 1 FROM orders_order o WHERE o.booking_id = NEW.id AND o.state IN {STATES})
    BEGIN SELECT RAISE(ABORT, 'order_needs_live_booking: the booking still holds the cards of an order'); END""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS order_needs_live_booking_insert",
    "DROP TRIGGER IF EXISTS order_needs_live_booking_update",
    "DROP TRIGGER IF EXISTS booking_keeps_its_order",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)
    return run


class Migration(migrations.Migration):
    dependencies = [("orders", "0007_trust_fields"), ("allocation", "0003_live_maintenance_index")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": PG_DOWN, "sqlite": SQLITE_DOWN}),
        ),
    ]
