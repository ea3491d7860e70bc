from collections import Counter

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from anchorgpu.catalog.models import Product


class Site(models.Model):
    code = models.SlugField(_("code"), max_length=16, unique=True)
    name = models.CharField(_("name"), max_length=80)
    country = models.CharField(_("country"), max_length=2, help_text=_("ISO 3166 two-letter code."))

    class Meta:
        ordering = ["code"]
        verbose_name = _("site")
        verbose_name_plural = _("sites")

    def __str__(self) -> str:
        return f"{self.code} — {self.name}"


class Host(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", _("active")
        MAINTENANCE = "maintenance", _("maintenance")
        RETIRED = "retired", _("retired")

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="hosts")
    name = models.SlugField(_("name"), max_length=64, unique=True)
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="hosts",
                                help_text=_("What this host's cards are sold as."))
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.ACTIVE,
                              help_text=_("Only active hosts take new bookings. For a planned window, "
                                          "schedule maintenance instead."))
    notes = models.TextField(_("notes"), blank=True)
    # How the shop reaches the host (the real provisioner and fleet discovery, over SSH). Empty address: a host
    # of the simulated fleet, or one not connected yet. The operator's private key is never stored here: it is
    # read from the file or secret the settings name (ANCHORGPU_HOST_SSH_KEY_FILE).
    ssh_address = models.CharField(_("SSH address"), max_length=255, blank=True,
                                   help_text=_("Host name or IP address the shop connects to."))
    ssh_port = models.PositiveIntegerField(_("SSH port"), default=22)
    ssh_user = models.CharField(_("SSH user"), max_length=32, default="anchorgpu",
                                help_text=_("The account on the host that the operator's key logs in to."))
    host_key = models.TextField(
        _("pinned host key"), blank=True,
        help_text=_("The host's public SSH key as one line, e.g. 'ssh-ed25519 AAAA…' (ssh-keyscan prints it). "
                    "A host that answers with another key is refused at every step and the operators are alerted."))
    runtime = models.CharField(_("container runtime"), max_length=16,
                               choices=[("podman", "podman"), ("docker", "Docker")], default="podman")
    last_contact_at = models.DateTimeField(_("last contact"), null=True, blank=True)
    discovered_at = models.DateTimeField(_("inventory read"), null=True, blank=True)
    inventory = models.JSONField(_("discovered inventory"), default=dict, blank=True,
                                 help_text=_("What fleet discovery last read on the host: cards, topology, driver, "
                                             "CPU, memory, disk and images."))
    sale_block = models.CharField(
        _("not sold because"), max_length=500, blank=True,
        help_text=_("Set by discovery or a host-key mismatch: while it is not empty the host takes no new "
                    "bookings. Clear it once the cause is fixed (discovery clears its own)."))

    class Meta:
        ordering = ["site__code", "name"]
        verbose_name = _("host")
        verbose_name_plural = _("hosts")

    def __str__(self) -> str:
        return self.name


class Device(models.Model):
    """One GPU. ``uid`` is its stable identity (e.g. the board serial)."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="devices")
    index = models.PositiveSmallIntegerField(_("index on host"))
    uid = models.CharField(_("stable id"), max_length=64, unique=True)
    nvlink_pair = models.PositiveSmallIntegerField(
        _("NVLink pair"), null=True, blank=True,
        help_text=_("Devices of one host with the same number are an NVLink pair. Empty: not paired."))
    gpu_uuid = models.CharField(_("GPU UUID"), max_length=80, blank=True,
                                help_text=_("The card's UUID as its driver reports it (nvidia-smi, amd-smi); "
                                            "set by fleet discovery. The container is given this card by it."))
    pci_bus_id = models.CharField(_("PCI bus id"), max_length=32, blank=True)

    class Meta:
        ordering = ["host", "index"]
        constraints = [models.UniqueConstraint(fields=["host", "index"], name="one_device_per_slot")]
        verbose_name = _("device")
        verbose_name_plural = _("devices")

    def __str__(self) -> str:
        return f"{self.host.name}/gpu{self.index}"


def validate_topology(pairs: list[int | None], *, cards_per_unit: int = 1) -> None:
    """Each NVLink pair number on a host is used by exactly two devices, and a
    host sold in lots of two has every device in a pair."""
    counts = Counter(p for p in pairs if p is not None)
    wrong = sorted(p for p, n in counts.items() if n != 2)
    if wrong:
        raise ValidationError(
            _("NVLink pair numbers must be used by exactly two devices each; check pair(s) %(pairs)s.")
            % {"pairs": ", ".join(map(str, wrong))})
    if cards_per_unit == 2 and any(p is None for p in pairs):
        raise ValidationError(_("This host is sold in lots of two: every device must be in an NVLink pair."))


class HostFault(models.Model):
    """A host that failed while it carried (or was to carry) paid terms: from ``started_at`` until it is cleared.
    While it is open the host is off sale (``Host.sale_block`` starting with ``FAULT_PREFIX``); the orders it hit
    are named in ``orders`` and credited by the service credit rule (``orders.faults``, ``orders.credits``)."""

    FAULT_PREFIX = "Fault: "

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="faults")
    started_at = models.DateTimeField(_("fault started"),
                                      help_text=_("When the fault began, as the operator knows it (UTC)."))
    marked_at = models.DateTimeField(_("marked faulty"))
    marked_by = models.CharField(_("marked by"), max_length=150)
    reason = models.TextField(_("what is wrong"))
    cleared_at = models.DateTimeField(_("cleared"), null=True, blank=True)
    cleared_by = models.CharField(_("cleared by"), max_length=150, blank=True)
    clear_reason = models.TextField(_("how it was fixed"), blank=True)
    # The orders whose cards on this host fell in the fault's time, as found when it was marked: their ids.
    orders = models.JSONField(_("orders hit"), default=list, blank=True)
    # The host's sale block before the fault's own, put back when the fault is cleared.
    previous_block = models.CharField(_("sale block before the fault"), max_length=500, blank=True)
    settled_at = models.DateTimeField(_("credits settled"), null=True, blank=True,
                                      help_text=_("When every order it hit had been credited."))

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["host"], condition=models.Q(cleared_at__isnull=True),
                                    name="one_open_fault_per_host"),
            models.CheckConstraint(condition=models.Q(cleared_at__isnull=True)
                                   | models.Q(cleared_at__gte=models.F("started_at")),
                                   name="fault_cleared_after_start"),
        ]
        verbose_name = _("host fault")
        verbose_name_plural = _("host faults")

    def __str__(self) -> str:
        return f"{self.host} · {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None
