from datetime import timedelta

import pytest

from anchorgpu.allocation import services
from anchorgpu.allocation.errors import NoLongerAvailable
from anchorgpu.allocation.models import BookingDevice
from tests import factories as f

pytestmark = pytest.mark.django_db(transaction=True)


def test_hold_then_no_longer_available():
    p = f.product()
    f.host(p, cards=2)
    start = f.now_minute() + timedelta(hours=1)
    b = services.hold_place(product=p, quantity=2, start=start, term_days=3)
    assert BookingDevice.objects.filter(booking=b, live=True).count() == 2
    with pytest.raises(NoLongerAvailable):
        services.hold_place(product=p, quantity=1, start=start + timedelta(days=1), term_days=3)
    later = services.hold_place(product=p, quantity=2, start=start + timedelta(days=3), term_days=3)
    assert later.starts_at == b.ends_at
