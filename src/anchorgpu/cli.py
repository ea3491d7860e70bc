"""The ``anchorgpu`` command.

    anchorgpu serve [--host H] [--port P]   migrate, load the demo into an empty database, serve the shop
                                            with the worker beside it (and run queued planner simulations)
    anchorgpu worker [--once] [--interval S] run the periodic sweeps and the queued planner simulations
    anchorgpu demo                          load the demo catalog, prices and fleet into an empty database
    anchorgpu compilecatalogs               compile the translation catalogs (no GNU gettext needed)
    anchorgpu offers | order ...            the shop's API from a terminal (see anchorgpu.client)
    anchorgpu plan --preset NAME ...        a training step's peak memory and the cards it fits on
    anchorgpu pilot run|scale|summary ...   a short real training run that proves a configuration
    anchorgpu pilot check ...               the rented machine's cards, driver, PyTorch build and operations
    anchorgpu <django command> ...          any Django management command (migrate, createsuperuser, ...)
"""

from __future__ import annotations

import argparse
import os
import sys


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    import django

    django.setup()


def _compile_catalogs(*, only_stale: bool) -> int:
    from anchorgpu.i18n_catalogs import compile_catalogs

    return len(compile_catalogs(only_stale=only_stale))


def _prepare_database(load: bool) -> None:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    if load:
        from anchorgpu.demo import load_demo

        if load_demo():
            print("Loaded the demo catalog, price list and fleet into the empty database.")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 1 and 65535, got {value}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than zero")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu", description="AnchorGPU shop and tools.")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="migrate, load the demo into an empty database, serve the shop")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8000)
    serve.add_argument("--threads", type=int, default=8)
    serve.add_argument("--no-demo", action="store_true", help="do not load the demo into an empty database")
    serve.add_argument("--no-simulations", action="store_true",
                       help="do not run the planner's queued simulations in this process (a worker runs them)")
    serve.add_argument("--no-worker", action="store_true",
                       help="do not start the worker beside the server (run `anchorgpu worker` yourself)")
    serve.add_argument("--worker-interval", type=_positive, default=5.0,
                       help="seconds between the worker's sweeps (5)")
    worker = sub.add_parser("worker", help="run the periodic sweeps (expire holds, ...)")
    worker.add_argument("--once", action="store_true", help="sweep once and exit")
    worker.add_argument("--interval", type=_positive, default=15.0, help="seconds between sweeps (15)")
    worker.add_argument("--no-simulations", action="store_true",
                        help="do not run the planner's queued simulations (another process runs them)")
    sub.add_parser("demo", help="load the demo catalog, prices and fleet into an empty database")
    sub.add_parser("compilecatalogs", help="compile the translation catalogs (.po to .mo)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "plan":  # the memory planner; prices from the shop's database
        _setup()
        from anchorgpu.planner.command import run as plan

        return plan(argv[1:])
    if argv and argv[0] == "pilot":  # the pilot kit: runs on the rented machine, no Django, no database
        from anchorgpu.pilot.command import run as pilot

        return pilot(argv[1:])
    if argv and argv[0] in ("offers", "order"):  # the API client: no Django, no database
        from anchorgpu.client.commands import run

        return run(argv)
    own = {"serve", "worker", "demo", "compilecatalogs", "-h", "--help"}
    if argv and argv[0] not in own:
        _setup()
        from django.core.management import execute_from_command_line

        execute_from_command_line(["anchorgpu", *argv])
        return 0
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    if args.command == "compilecatalogs":
        print(f"Compiled {_compile_catalogs(only_stale=False)} catalog(s).")
        return 0
    if args.command == "serve" and not args.no_demo:
        # The demo server may take orders to the demo's public test-vector deposit keys (README).
        os.environ.setdefault("ANCHORGPU_ALLOW_TEST_KEYS", "1")
    if args.command == "serve":
        from anchorgpu.serve import site_url_default

        site_url_default(args.host, args.port)  # links in emails follow the port served on, unless configured
    _setup()
    if args.command == "serve":
        _compile_catalogs(only_stale=True)  # a checkout that has not been through `make` yet
        _prepare_database(load=not args.no_demo)
        from anchorgpu.serve import run as serve

        return serve(host=args.host, port=args.port, threads=args.threads, worker=not args.no_worker,
                     worker_interval=args.worker_interval, simulations=not args.no_simulations)
    if args.command == "worker":
        from anchorgpu import worker

        if args.once:
            print(worker.run_once())
        else:
            worker.run_forever(args.interval, simulations=not args.no_simulations)
        return 0
    if args.command == "demo":
        _prepare_database(load=False)
        from anchorgpu.demo import load_demo

        print("Demo loaded." if load_demo() else "The database is not empty; nothing loaded.")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
