"""``anchorgpu offers`` and ``anchorgpu order create|show|list|paid|cancel|extend``:
the shop's API from a terminal. Tables for people, ``--json`` for scripts.

The shop and the token come from ``--url``/``--token`` or the environment
(``ANCHORGPU_URL``, ``ANCHORGPU_TOKEN``); a token is made on the shop's
account page. Exit codes: 0 done, 1 refused by the shop, 2 bad usage,
3 shop unreachable."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

from .http import ApiError, Client
from .tables import order_lines, render_table

DEFAULT_URL = "http://127.0.0.1:8000"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("ANCHORGPU_URL", DEFAULT_URL),
                        help="the shop's address (ANCHORGPU_URL)")
    parser.add_argument("--token", default=os.environ.get("ANCHORGPU_TOKEN", ""),
                        help="API token from the account page (ANCHORGPU_TOKEN)")
    parser.add_argument("--lang", default=os.environ.get("ANCHORGPU_LANG", "en"), choices=["en", "pt", "fr", "ko"],
                        help="language of the shop's messages")
    parser.add_argument("--json", action="store_true", help="print the shop's JSON answer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu", description="AnchorGPU shop from the command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    offers = sub.add_parser("offers", help="the live catalog")
    _common(offers)
    offers.add_argument("--term", type=int, choices=[3, 7, 30], default=7)
    offers.add_argument("--quantity", type=int, default=1)
    offers.add_argument("--start", help="earliest start, ISO-8601 (UTC)")
    offers.add_argument("--environment", help="only cards that run this environment")

    order = sub.add_parser("order", help="create and follow orders")
    actions = order.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="place an order (holds the cards and quotes the payment)")
    _common(create)
    create.add_argument("--product", required=True)
    create.add_argument("--quantity", type=int, default=1)
    create.add_argument("--term", type=int, choices=[3, 7, 30], required=True)
    create.add_argument("--start", help="ISO-8601 (UTC); default: as soon as possible")
    create.add_argument("--environment", required=True)
    create.add_argument("--option", action="append", default=[], dest="options")
    create.add_argument("--asset", required=True, help="btc, eth, usdc-ethereum, …")
    create.add_argument("--name", required=True)
    create.add_argument("--email", required=True)
    create.add_argument("--country", required=True, help="two-letter code, e.g. PT")
    create.add_argument("--company", default="")
    create.add_argument("--billing-address", default="")
    create.add_argument("--vat-id", default="")
    create.add_argument("--ssh-key-file", type=Path, action="append", required=True,
                        help="a public key file (.pub); repeat for several")
    create.add_argument("--accept", action="store_true", help="accept the fixed term and the wipe at its end")
    create.add_argument("--idempotency-key", default="",
                        help="send the same key again to retry safely (default: a new random key)")
    for name, text in (("show", "an order's status, quote and access"), ("paid", "tell the shop you have paid"),
                       ("cancel", "cancel an order awaiting payment")):
        action = actions.add_parser(name, help=text)
        _common(action)
        action.add_argument("reference")
        if name == "paid":
            action.add_argument("--txid", default="", help="the transaction id, if your wallet shows it")
    extend = actions.add_parser("extend", help="extend a paid term on the same cards (without --days: what can be "
                                               "bought, and until when the cards are free)")
    _common(extend)
    extend.add_argument("reference")
    extend.add_argument("--days", type=int, choices=[3, 7, 30], help="days to add right after the term")
    extend.add_argument("--asset", help="the asset to pay the extension in (btc, eth, …); with --days")
    listing = actions.add_parser("list", help="your orders")
    _common(listing)
    return parser


class UsageError(Exception):
    pass


def _create_body(args) -> dict:
    keys = []
    for path in args.ssh_key_file:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        if "PRIVATE KEY" in text or "-----BEGIN" in text:
            # Refused here, before anything leaves this machine.
            raise UsageError(f"{path} holds a PRIVATE key; it was not sent. Give the public key instead "
                             f"({path}.pub, if that is where it lives).")
        keys.append(text)
    return {"product": args.product, "quantity": args.quantity, "term": args.term, "start": args.start,
            "environment": args.environment, "options": args.options, "name": args.name, "email": args.email,
            "company": args.company, "country": args.country, "billing_address": args.billing_address,
            "vat_id": args.vat_id, "ssh_keys": keys, "asset": args.asset, "accept": args.accept}


RETRIES = 2  # after a timeout, a lost connection or a 5xx, with the same idempotency key


def _create(client: Client, body: dict, key: str) -> dict:
    """POST /orders, retried with the same key: the shop places the order at most once."""
    for attempt in range(RETRIES + 1):
        try:
            return client.request("POST", "orders", body=body, headers={"Idempotency-Key": key})
        except ApiError as exc:
            if exc.usage or not (exc.status == 0 or exc.status >= 500) or attempt == RETRIES:
                raise
            time.sleep(1.0 + attempt)
    raise AssertionError("unreachable")


def _show_order(order: dict, out) -> None:
    quote, payment, access = order.get("quote"), order.get("payment"), order.get("access")
    rows = [("order", order["reference"]), ("state", order.get("state_label") or order["state"]),
            ("cards", f"{order['quantity']} × {order['product']}"), ("term", f"{order['term']} days"),
            ("period (UTC)", f"{order['starts_at']} → {order['ends_at']}"),
            ("total", f"{order['total']} {order['currency']}")]
    if order.get("extends"):
        rows.append(("extends", f"order {order['extends']} (paid, its days are added to that term)"))
    if order.get("extensions"):
        rows.append(("extensions", ", ".join(order["extensions"])))
    if quote:
        rows += [("pay", f"{quote['amount_display']} {quote['symbol']} ({quote['network_name']})"),
                 ("to address", quote["address"]), ("quote expires", quote["expires_at"]),
                 ("payment URI", quote["payment_uri"])]
    if payment:
        rows.append(("payment", f"{payment['status']}, received {payment['received']} base units"))
    if access:
        rows.append(("ssh", f"ssh -p {access['port']} {access['user']}@{access['host']}"))
    if order.get("invoice"):
        rows.append(("invoice", order["invoice"]["number"]))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}", file=out)
    if order.get("lines"):
        print(file=out)
        print(render_table(["item", "qty", "amount"], order_lines(order["lines"]), align="<>>"), file=out)


def run(argv: list[str], out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    client = Client(args.url, token=args.token, language=args.lang)
    key = ""
    try:
        if args.command == "offers":
            data = client.request("GET", "offers", query={"term": args.term, "quantity": args.quantity,
                                                          "start": args.start, "environment": args.environment})
            if args.json:
                json.dump(data, out, indent=2)
                print(file=out)
                return 0
            rows = [(o["name"], f"{o['units_free_now']}/{o['units_total']}", o["earliest_start"] or "—",
                     *(o["price"].get(str(days), "—") for days in (3, 7, 30)), o["currency"] or "")
                    for o in data]
            print(render_table(["card", "free now", "earliest start (UTC)", "3 days", "7 days", "30 days",
                                "currency"], rows, align="<><>>><"), file=out)
            return 0
        if not args.token:
            print("anchorgpu: give an API token (--token or ANCHORGPU_TOKEN); make one on your account page.",
                  file=err)
            return 2
        if args.action == "create":
            key = args.idempotency_key or f"cli-{uuid.uuid4().hex}"
            data = _create(client, _create_body(args), key)
        elif args.action == "list":
            data = client.request("GET", "orders")
        else:
            reference = urllib.parse.quote(args.reference, safe="")
            if args.action == "show":
                data = client.request("GET", f"orders/{reference}")
            elif args.action == "extend" and args.days is None:
                data = client.request("GET", f"orders/{reference}/extension")
            elif args.action == "extend":
                if not args.asset:
                    raise UsageError("give --asset to pay the extension in (e.g. btc)")
                data = client.request("POST", f"orders/{reference}/extend",
                                      body={"days": args.days, "asset": args.asset})
            elif args.action == "paid":
                data = client.request("POST", f"orders/{reference}/paid", body={"txid": args.txid})
            else:
                data = client.request("POST", f"orders/{reference}/cancel", body={})
    except UsageError as exc:
        print(f"anchorgpu: {exc}", file=err)
        return 2
    except ApiError as exc:
        if args.json:
            json.dump(exc.as_json(), out, indent=2)
            print(file=out)
        print(f"anchorgpu: {exc.describe()}", file=err)
        if key and (exc.status == 0 or exc.status >= 500) and not exc.usage:
            print(f"anchorgpu: the order may or may not have been placed. Run the same command again with "
                  f"--idempotency-key {key} : it places the order at most once.", file=err)
        if exc.usage:
            return 2
        return 3 if exc.status == 0 else 1
    if args.json:
        json.dump(data, out, indent=2)
        print(file=out)
    elif args.action == "list":
        orders = data.get("orders", data) if isinstance(data, dict) else data
        print(render_table(["order", "state", "cards", "term", "starts (UTC)", "total"],
                           [(o["reference"], o.get("state_label") or o["state"], f"{o['quantity']} × {o['product']}",
                             f"{o['term']} d", o["starts_at"], f"{o['total']} {o['currency']}") for o in orders],
                           align="<<<><>"), file=out)
    elif args.action == "extend" and args.days is None:
        _show_extension(data, out)
    else:
        _show_order(data, out)
    return 0


def _show_extension(found: dict, out) -> None:
    if found["extendable"]:
        print(f"order {found['reference']} can be extended from {found['starts_at']} (UTC) by:", file=out)
        print(render_table(["days", "price"], [(str(d), f"{found['prices'].get(str(d), '—')} {found['currency'] or ''}")
                                               for d in found["days"]], align=">>"), file=out)
        print(f"the cards are free until {found['free_until']} (UTC) at least", file=out)
    else:
        print(f"order {found['reference']} cannot be extended now: {found['message'] or found['refusal']}", file=out)
