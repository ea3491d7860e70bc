"""The seller printed on invoices and credit notes, from the settings (``ANCHORGPU_COMPANY_*``).

Each document keeps a copy of these details as they were when it was issued (``Invoice.seller``), so a move or a
new VAT id later changes no document already sent. Production refuses to start with the placeholder address
(``anchorgpu.production``), and the services refuse to issue with it there too."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from anchorgpu.production import company_address_is_placeholder


@dataclass(frozen=True)
class Seller:
    name: str
    address: tuple[str, ...]  # lines
    country: str  # ISO 3166-1 alpha-2
    vat_id: str  # blank: not registered for VAT
    registration: str  # company registration (register and number), as it must be printed
    contact: str  # e-mail, telephone: one line

    @property
    def registered_for_vat(self) -> bool:
        return bool(self.vat_id)

    def as_data(self) -> dict:
        return {**asdict(self), "address": list(self.address)}

    @classmethod
    def from_data(cls, data: dict) -> Seller:
        return cls(name=data.get("name", ""), address=tuple(data.get("address", ())), country=data.get("country", ""),
                   vat_id=data.get("vat_id", ""), registration=data.get("registration", ""),
                   contact=data.get("contact", ""))


def address_lines(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").replace("\n", "|").split("|") if part.strip())


def current_seller() -> Seller:
    address = getattr(settings, "ANCHORGPU_COMPANY_ADDRESS", "")
    if getattr(settings, "PRODUCTION", False) and company_address_is_placeholder(address):
        raise ImproperlyConfigured("ANCHORGPU_COMPANY_ADDRESS is the placeholder: no invoice is issued with it")
    return Seller(name=getattr(settings, "ANCHORGPU_COMPANY_NAME", "AnchorGPU"), address=address_lines(address),
                  country=getattr(settings, "ANCHORGPU_COMPANY_COUNTRY", "").upper(),
                  vat_id=getattr(settings, "ANCHORGPU_COMPANY_VAT_ID", ""),
                  registration=getattr(settings, "ANCHORGPU_COMPANY_REGISTRATION", ""),
                  contact=getattr(settings, "ANCHORGPU_COMPANY_CONTACT", ""))
