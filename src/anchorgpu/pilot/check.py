"""``anchorgpu pilot check``: the accelerator stack and its essential operations, before a campaign.

    anchorgpu pilot check [--product CODE] [--extension NAME]... [--extension-call MODULE:FUNCTION]...
                          [--json FILE] [--skip-ops] [--record FILE]

First the record (``stack_probe``): devices with memory, capability or gfx
target, bus and NUMA node; driver; CUDA or ROCm runtime; PyTorch and the
architectures it was compiled for; NCCL/RCCL; the topology. Then the verdict
(``stack_rules``) against the product booked, given or inferred from the
device names. Then the operations (``opchecks``): bf16 matmul and attention
on each GPU, an all-reduce across them, and the extensions named; on a machine
without a GPU they run on the CPU, which shows the paths work but does not
make the stack pass. ``--record`` judges a record saved earlier (a check's
``--json`` or a pilot report) instead of this machine, without operations.

Exit codes: 0 everything passed, 1 a finding or an operation failed, 2 bad usage.
"""

from __future__ import annotations

import argparse

from .check_report import check_report, load_record, render, stack_section, write_json
from .stack import PRODUCTS
from .stack_rules import judge


def _call_spec(text: str) -> str:
    module, sep, function = text.partition(":")
    if not sep or not module.strip() or not function.strip() or not function.isidentifier():
        raise argparse.ArgumentTypeError(f"“{text}” is not MODULE:FUNCTION, e.g. my_kernels:self_test")
    return f"{module.strip()}:{function.strip()}"


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--product", choices=sorted(PRODUCTS),
                        help="the product booked (inferred from the device names when left out)")
    parser.add_argument("--extension", action="append", default=[], metavar="MODULE",
                        help="a compiled extension to import (repeat for more)")
    parser.add_argument("--extension-call", action="append", default=[], type=_call_spec, metavar="MODULE:FUNCTION",
                        help="import MODULE and call FUNCTION() with no arguments (repeat for more)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--skip-ops", action="store_true",
                        help="only the stack: no matmul, attention or all-reduce (named extensions are still checked)")
    parser.add_argument("--record", metavar="FILE", help="judge a saved stack record instead of this machine")


def probe_and_judge(product: str | None = None) -> dict:
    """The ``stack`` section for a pilot report; a failure of the probe itself is reported, not raised."""
    try:
        from .stack_probe import probe_stack

        record = probe_stack()
        return stack_section(record, judge(record, product))
    except Exception as exc:  # the pilot's figures matter more than this record: never lose a run over it
        return {"record_version": 1, "error": f"the stack probe failed: {type(exc).__name__}: {exc}"}


def run_check(args, out, err) -> int:
    say = lambda what: print(f"pilot check: {what}", file=err, flush=True)  # noqa: E731
    operations, note = [], None
    if args.record:
        record = load_record(args.record)
        note = "not run: judging a saved record"
    else:
        from .stack_probe import probe_stack

        say("reading the stack")
        record = probe_stack()
    verdict = judge(record, args.product)
    if not args.record:
        operations, note = _operations(record, args, say)
    report = check_report(record, verdict, operations, note)
    print(render(report), file=out)
    if args.json:
        write_json(report, args.json)
        print(f"Report: {args.json}", file=out)
    return 0 if report["passed"] else 1


def _operations(record, args, say):
    if record.torch_version is None:
        return [], "not run: PyTorch cannot be imported"
    from .opchecks import check_extension, check_extension_call, run_operations

    gpu = bool(record.devices) and record.build in ("cuda", "rocm")
    if args.skip_ops:
        device = "cuda:0" if gpu else "cpu"
        results = [check_extension(name) for name in args.extension]
        results += [check_extension_call(spec, device) for spec in args.extension_call]
        return results, "matmul, attention and all-reduce skipped (--skip-ops)"
    note = None if gpu else "on the CPU: no GPU is visible, so this shows the code paths work, nothing more"
    return run_operations("cuda" if gpu else "cpu", len(record.devices), args.extension, args.extension_call,
                          say=say), note
