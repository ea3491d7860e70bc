"""Fleet discovery: read a host's cards, topology, CPU, memory, disk and images over SSH, and reconcile its
record with what it really has.

The network part (``read_inventory``) runs outside any transaction; the write (``host_discover``'s second half)
is one transaction holding the product's row lock (the lock every placement of the product takes its turn on)
and the host's. Discovery never deletes, re-indexes, re-pairs or re-identifies a device that has a live booking:
it says so in the host's ``sale_block`` instead, and a blocked host takes no new bookings. A block that discovery
set starts with ``BLOCK_PREFIX``; discovery clears its own block once the cause is gone, never anyone else's.

Which card a product promises is ``card_match``; whether a driver runs an image's CUDA is ``driver_compat``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from anchorgpu.allocation import selectors as allocation_selectors
from anchorgpu.allocation.models import BookingDevice
from anchorgpu.audit.services import audit_record
from anchorgpu.catalog.models import Environment
from anchorgpu.catalog.rules import environment_fits

from . import inventory_parse as parse
from . import ssh
from .card_match import card_problem
from .driver_compat import cuda_driver_problem
from .models import Device, Host
from .services import _lock_products

BLOCK_PREFIX = "Discovery: "
SCRATCH_PATH = "/"
_TEMP_INDEX = 30000  # where a device waits while its host's devices are renumbered (the slot index is unique)


class DiscoveryError(Exception):
    """The host could not be read; ``message`` says why, for the operator."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class DiscoveryResult:
    host: Host
    inventory: dict
    problems: list[str]
    changes: dict = field(default_factory=dict)
    dry_run: bool = False

    @property
    def sold(self) -> bool:
        return not self.host.sale_block


# --- reading the host (network only) -----------------------------------------


def _run(conn: ssh.Connection, argv: list[str]) -> str:
    return conn.run(argv, check=True).stdout


def read_inventory(conn: ssh.Connection, *, vendor: str, runtime: str) -> tuple[dict, list[str]]:
    """What the host says about itself, and the sentences for what could not be read. Raises
    ``ssh.HostUnreachable`` when the connection drops."""
    inv: dict = {"vendor": vendor, "runtime": runtime, "cards": [], "nvlink": [], "driver_version": ""}
    problems: list[str] = []

    def step(label: str, fn):
        try:
            return fn()
        except ssh.CommandFailed as exc:
            problems.append(f"{label} failed on the host: {exc.result.brief(200)}")
        except ValueError as exc:
            problems.append(f"{label}: {exc}")
        return None

    if vendor.upper() == "AMD":
        cards = step("rocm-smi", lambda: parse.parse_rocm_smi(_run(conn, [
            "rocm-smi", "--showproductname", "--showuniqueid", "--showbus", "--showmeminfo", "vram", "--json"])))
        links: dict = {}
    else:
        cards = step("nvidia-smi", lambda: parse.parse_nvidia_query(_run(conn, [
            "nvidia-smi", f"--query-gpu={','.join(parse.QUERY_FIELDS)}", "--format=csv"])))
        links = step("nvidia-smi topo -m", lambda: parse.parse_nvidia_topology(
            _run(conn, ["nvidia-smi", "topo", "-m"]))) or {}
    cards = cards or []
    inv["cards"] = [c.as_dict() for c in cards]
    inv["nvlink"] = [[a, b, n] for (a, b), n in sorted(links.items())]
    drivers = sorted({c.driver_version for c in cards if c.driver_version})
    if len(drivers) > 1:
        problems.append(f"the cards report different drivers ({', '.join(drivers)})")
    inv["driver_version"] = drivers[0] if drivers else ""
    inv["cpu_count"] = step("nproc", lambda: parse.parse_nproc(_run(conn, ["nproc"])))
    inv["cpu_model"] = step("lscpu", lambda: parse.parse_lscpu_model(_run(conn, ["lscpu", "-J"]))) or ""
    inv["memory_bytes"] = step("/proc/meminfo", lambda: parse.parse_meminfo(_run(conn, ["cat", "/proc/meminfo"])))
    inv["disk"] = step("df", lambda: parse.parse_df(_run(conn, [
        "df", "-B1", "--output=target,size,avail", SCRATCH_PATH])))
    if runtime == "docker":
        images = step("docker images", lambda: parse.parse_docker_images(_run(conn, [
            "docker", "images", "--format", "{{json .}}"])))
    else:
        images = step("podman images", lambda: parse.parse_podman_images(_run(conn, [
            "podman", "images", "--format", "json"])))
    inv["images"] = images if images is not None else None
    return inv, problems


# --- judging what was read (no writes) ---------------------------------------


def _environments_for(host: Host):
    return [env for env in Environment.objects.filter(is_active=True).order_by("position", "pk")
            if environment_fits(host.product.stack, env.stack)]


def judge(host: Host, inv: dict, *, environments) -> list[str]:
    """The reasons, in sentences, why the host as read must not be sold as its product."""
    problems = []
    product = host.product
    cards = inv.get("cards") or []
    if not cards:
        problems.append("the host shows no GPU")
    seen = set()
    for card in cards:
        problem = card_problem(card_name=card["name"], memory_mib=card.get("memory_mib"), product_name=product.name,
                               product_memory_gb=product.memory_gb_per_card)
        if problem and problem not in seen:
            seen.add(problem)
            problems.append(problem)
    driver = inv.get("driver_version") or ""
    if product.vendor.upper() != "AMD":
        for env in environments:
            if env.cuda_version and cards:
                problem = cuda_driver_problem(driver, env.cuda_version)
                if problem:
                    problems.append(f"{env.name}: {problem}")
    images = inv.get("images")
    if images is None:
        problems.append("the runtime's image list could not be read")
    else:
        have = {parse.normal_image(name) for name in images}
        missing = [env.image for env in environments if env.image and parse.normal_image(env.image) not in have]
        if missing:
            problems.append(f"image(s) missing on the host: {', '.join(missing)}")
    return problems


@dataclass
class _Plan:
    updates: list = field(default_factory=list)  # (device, {field: value})
    creates: list = field(default_factory=list)  # card dicts
    deletes: list = field(default_factory=list)  # devices
    problems: list = field(default_factory=list)


def plan_devices(host: Host, inv: dict, *, devices: list[Device], busy: set[int]) -> _Plan:
    """How to bring the host's device rows in line with its cards, without touching a booked device."""
    plan = _Plan()
    cards = inv.get("cards") or []
    if not cards:
        return plan
    by_uuid = {d.gpu_uuid: d for d in devices if d.gpu_uuid}
    matched: dict[int, Device] = {}  # card index -> device
    used: set[int] = set()
    for card in cards:
        d = by_uuid.get(card["uuid"])
        if d is not None:
            matched[card["index"]] = d
            used.add(d.pk)
    free_by_index = {d.index: d for d in devices if d.pk not in used}
    for card in cards:
        if card["index"] not in matched and card["index"] in free_by_index:
            d = free_by_index.pop(card["index"])
            matched[card["index"]] = d
            used.add(d.pk)
    gone = [d for d in devices if d.pk not in used]
    new_cards = [c for c in cards if c["index"] not in matched]
    booked_here = any(d.pk in busy for d in devices)
    if (gone or new_cards) and booked_here:
        plan.problems.append(f"the host shows {len(cards)} card(s) where the record has {len(devices)}, and devices "
                             "are booked: the record was not changed")
        gone, new_cards = [], []
    taken = dict(Device.objects.filter(uid__in=[c["uuid"] for c in cards]).exclude(host=host)
                 .values_list("uid", "host__name"))
    taken.update(Device.objects.filter(gpu_uuid__in=[c["uuid"] for c in cards]).exclude(host=host)
                 .values_list("gpu_uuid", "host__name"))
    for uuid, other in sorted(taken.items()):
        plan.problems.append(f"card {uuid} is recorded on host {other}")
    pairs = parse.nvlink_pairs([c["index"] for c in cards],
                               {(a, b): n for a, b, n in inv.get("nvlink") or []})
    if host.product.cards_per_unit == 2:
        lonely = [c["index"] for c in cards if c["index"] not in pairs]
        if lonely:
            plan.problems.append(f"sold in lots of two, but card(s) {', '.join(map(str, lonely))} have no NVLink "
                                 "partner")
    # Keep the recorded pairing when a booked device's partner would change.
    uuid_of = {c["index"]: c["uuid"] for c in cards}
    def partners(assign: dict[int, int | None], key) -> set:
        groups: dict = {}
        for k, p in assign.items():
            if p is not None:
                groups.setdefault(p, set()).add(key(k))
        return {frozenset(g) for g in groups.values()}
    ident = {d.pk: d.gpu_uuid or d.uid for d in devices}
    ident.update({d.pk: uuid_of[i] for i, d in matched.items()})  # a device is the card it was matched with
    booked_uuids = {ident[d.pk] for d in devices if d.pk in busy}
    new_groups = partners({i: pairs.get(i) for i in uuid_of}, lambda i: uuid_of[i])
    old_groups = partners({d.pk: d.nvlink_pair for d in devices}, lambda pk: ident[pk])
    keep_pairs = any((g in old_groups) != (g in new_groups) for g in old_groups | new_groups if g & booked_uuids)
    if keep_pairs:
        plan.problems.append("the host's NVLink pairs differ from the record while devices are booked: not changed")
    for card in cards:
        d = matched.get(card["index"])
        if card["uuid"] in taken:
            continue
        if d is None:
            if card in new_cards:
                plan.creates.append({**card, "nvlink_pair": pairs.get(card["index"])})
            continue
        want = {"gpu_uuid": card["uuid"], "pci_bus_id": card.get("pci_bus_id") or "", "index": card["index"],
                "nvlink_pair": d.nvlink_pair if keep_pairs else pairs.get(card["index"]), "uid": card["uuid"]}
        if d.pk in busy:
            if d.gpu_uuid and d.gpu_uuid != card["uuid"]:
                plan.problems.append(f"gpu{d.index} is booked and now shows another card ({card['uuid']})")
            if d.index != card["index"]:
                plan.problems.append(f"card {card['uuid']} moved from slot {d.index} to {card['index']} while booked")
            want = {"pci_bus_id": want["pci_bus_id"], "gpu_uuid": d.gpu_uuid or card["uuid"]}
        changed = {k: v for k, v in want.items() if getattr(d, k) != v}
        if changed:
            plan.updates.append((d, changed))
    plan.deletes = gone
    return plan


def _busy_device_ids(host: Host, now: datetime) -> set[int]:
    bookings = allocation_selectors.live_customer_bookings(host_id=host.pk, now=now)
    return set(BookingDevice.objects.filter(booking__in=bookings, device__host=host)
               .values_list("device_id", flat=True))


# --- the service ---------------------------------------------------------------


def host_discover(*, host: Host, actor: str, dry_run: bool = False, now: datetime | None = None) -> DiscoveryResult:
    """Read ``host`` over SSH and reconcile its record; raises ``DiscoveryError`` when it cannot be read."""
    target = ssh.Target.of(host)
    vendor, runtime = host.product.vendor, host.runtime
    try:
        conn = ssh.connect(target)
    except ssh.HostKeyMismatch as exc:
        if not dry_run:
            _block(host=host, actor=actor, reason=f"{BLOCK_PREFIX}{exc}"[:500], action="host_key_refused")
        raise DiscoveryError(str(exc)) from None
    except ssh.SSHError as exc:
        raise DiscoveryError(str(exc)) from None
    try:
        with conn:
            inv, read_problems = read_inventory(conn, vendor=vendor, runtime=runtime)
    except ssh.SSHError as exc:
        raise DiscoveryError(str(exc)) from None
    now = now or timezone.now()
    inv["read_at"] = now.isoformat()
    if dry_run:
        devices = list(host.devices.order_by("index"))
        plan = plan_devices(host, inv, devices=devices, busy=_busy_device_ids(host, now))
        problems = read_problems + judge(host, inv, environments=_environments_for(host)) + plan.problems
        return DiscoveryResult(host=host, inventory=inv, problems=problems, changes=_summary(plan), dry_run=True)
    return _apply(host_id=host.pk, inv=inv, read_problems=read_problems, actor=actor, now=now)


def _summary(plan: _Plan) -> dict:
    return {"created": [c["uuid"] for c in plan.creates],
            "updated": {(d.gpu_uuid or d.uid): sorted(ch) for d, ch in plan.updates},
            "deleted": [d.uid for d in plan.deletes]}


@transaction.atomic
def _apply(*, host_id: int, inv: dict, read_problems: list[str], actor: str, now: datetime) -> DiscoveryResult:
    product_id = Host.objects.filter(pk=host_id).values_list("product_id", flat=True).first()
    if product_id is None:
        raise DiscoveryError("the host no longer exists")
    _lock_products(product_id)
    host = Host.objects.select_related("product").select_for_update(of=("self",)).get(pk=host_id)
    devices = list(host.devices.order_by("index"))
    plan = plan_devices(host, inv, devices=devices, busy=_busy_device_ids(host, now))
    try:
        with transaction.atomic():  # a savepoint: a record that cannot be reconciled is left as it was
            _write_devices(host, plan, actor)
    except IntegrityError as exc:
        plan.creates, plan.updates, plan.deletes = [], [], []
        plan.problems.append(f"the device rows could not be brought in line with the host ({exc}); nothing about "
                             "them was changed: fix them on the host's page")
    problems = read_problems + judge(host, inv, environments=_environments_for(host)) + plan.problems
    inv["problems"] = problems
    old_block = host.sale_block
    if problems:
        new_block = (BLOCK_PREFIX + "; ".join(problems))[:500] if _ours(old_block) else old_block
    else:
        new_block = "" if _ours(old_block) else old_block
    host.inventory, host.discovered_at, host.last_contact_at, host.sale_block = inv, now, now, new_block
    host.save(update_fields=["inventory", "discovered_at", "last_contact_at", "sale_block"])
    audit_record(actor=actor, action="host_discovered", obj=host, from_state=_sold(old_block),
                 to_state=_sold(new_block), reason="; ".join(problems)[:500],
                 data={"cards": len(inv.get("cards") or []), "sale_block": [old_block, new_block], **_summary(plan)})
    return DiscoveryResult(host=host, inventory=inv, problems=problems, changes=_summary(plan))


def _write_devices(host: Host, plan: _Plan, actor: str) -> None:
    kept = []
    for d in plan.deletes:
        try:
            with transaction.atomic():
                uid = d.uid
                d.delete()
        except ProtectedError:
            kept.append(d)
            Device.objects.filter(pk=d.pk).update(nvlink_pair=None)  # no partner among the cards really there
            plan.problems.append(f"{d} is no longer on the host but has past bookings: remove it on the host's page "
                                 "once its history is settled")
        else:
            audit_record(actor=actor, action="device_removed_by_discovery", obj=host, data={"uid": uid})
    plan.deletes = [d for d in plan.deletes if d not in kept]
    moving = [(d, ch) for d, ch in plan.updates if "index" in ch]
    for d, _ch in moving:  # free the slots first: (host, index) is unique
        Device.objects.filter(pk=d.pk).update(index=_TEMP_INDEX + d.index)
    for d, ch in plan.updates:
        before = {k: getattr(d, k) for k in ch}
        Device.objects.filter(pk=d.pk).update(**ch)
        audit_record(actor=actor, action="device_discovered", obj=d,
                     data={"changed": {k: [before[k], v] for k, v in ch.items()}})
    for card in plan.creates:
        d = Device.objects.create(host=host, index=card["index"], uid=card["uuid"], gpu_uuid=card["uuid"],
                                  pci_bus_id=card.get("pci_bus_id") or "", nvlink_pair=card["nvlink_pair"])
        audit_record(actor=actor, action="device_discovered", obj=d, data={"created": card["uuid"]})


def _sold(block: str) -> str:
    return "not sold" if block else "sold"


def _ours(block: str) -> bool:
    return not block or block.startswith(BLOCK_PREFIX)


@transaction.atomic
def _block(*, host: Host, actor: str, reason: str, action: str) -> None:
    locked = Host.objects.select_for_update().get(pk=host.pk)
    if locked.sale_block and not _ours(locked.sale_block):
        return  # someone else's block stays as it is
    if locked.sale_block != reason:
        old = locked.sale_block
        locked.sale_block = reason
        locked.save(update_fields=["sale_block"])
        audit_record(actor=actor, action=action, obj=locked, from_state=_sold(old), to_state=_sold(reason),
                     reason=reason, data={"sale_block": [old, reason]})
    host.sale_block = locked.sale_block
