"""``anchorgpu pilot``: check the stack, run a pilot, test its scaling, or summarise a report.

    anchorgpu pilot check [--product CODE] [--extension NAME] [--json FILE] [--skip-ops]
    anchorgpu pilot run --model DIR_OR_CONFIG --data FILE [...] --report FILE.json
    anchorgpu pilot scale --nproc 1,2,4 --parallel ddp,fsdp --model ... --data ... [...]
    anchorgpu pilot summary FILE.json [--html FILE.html]

Exit codes: 0 done (and the restore proof passed), 1 the run finished but the
restore proof failed (for ``check``: a finding or an operation failed), 2 bad
input (a message, never a traceback), 3 the machine could not run it (e.g. out
of memory).
"""

from __future__ import annotations

import argparse
import os
import sys

from .check import add_check_arguments
from .errors import PilotInputError
from .run_arguments import add_run_arguments, options_from_args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anchorgpu pilot", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("check", help="the accelerators, driver, PyTorch build and essential operations, "
                                         "judged against the product booked",
                           description="Record this machine's accelerator stack, judge it against the product "
                                       "booked and run the essential operations. Exit codes: 0 all passed, 1 a "
                                       "failure found, 2 bad usage.")
    add_check_arguments(check)
    run = sub.add_parser("run", help="a short real training run, measured, with a restore proof")
    add_run_arguments(run)
    run.add_argument("--checkpoint-dir", default="pilot-checkpoint")
    run.add_argument("--report", default="pilot-report.json")
    run.add_argument("--html", help="also write a readable HTML summary with plots")
    run.add_argument("--no-restore-check", action="store_true", help="skip the fresh-process restore proof")
    summary = sub.add_parser("summary", help="a terminal (or HTML) summary of a report")
    summary.add_argument("report")
    summary.add_argument("--html", help="write an HTML summary with plots to this file")
    sub.add_parser("scale", help="the same run under DDP and FSDP on 1, 2, ... processes (see --help)",
                   add_help=False)
    return parser


def _run(args, out, err) -> int:
    from .run import run_pilot
    from .summary import terminal_summary, write_html

    options = options_from_args(args, checkpoint_dir=args.checkpoint_dir, report=args.report,
                                restore_check=not args.no_restore_check)
    report = run_pilot(options, say=lambda what: print(f"pilot: {what}", file=err, flush=True))
    print(terminal_summary(report), file=out)
    if args.html:
        write_html(report, args.html)
        print(f"HTML summary: {args.html}", file=out)
    print(f"Report: {args.report}", file=out)
    return 0 if report["restore"].get("passed") in (True, None) else 1


def run(argv: list[str], out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    # The pilot reads models and tokenizers from local files only; make any stray hub lookup fail fast.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if argv[:1] == ["scale"]:
        from .scale import main as scale_main

        return scale_main(argv[1:], out=out, err=err)
    args = build_parser().parse_args(argv)
    try:
        if args.action == "check":  # before the torch guard: a machine without torch is a finding, not bad usage
            from .check import run_check

            return run_check(args, out, err)
        try:
            import torch  # noqa: F401
        except ImportError:
            print("anchorgpu pilot: the pilot needs the ml extra: pip install torch 'anchorgpu[ml]'", file=err)
            return 2
        if args.action == "summary":
            from .summary import load_report, terminal_summary, write_html

            report = load_report(args.report)
            print(terminal_summary(report), file=out)
            if args.html:
                write_html(report, args.html)
            return 0
        return _run(args, out, err)
    except PilotInputError as exc:
        print(f"anchorgpu pilot: {exc}", file=err)
        return 2
    except MemoryError:
        print("anchorgpu pilot: the machine ran out of host memory; try a smaller micro-batch or sequence length.",
              file=err)
        return 3
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            print("anchorgpu pilot: the device ran out of memory: the configuration does not fit; try a smaller "
                  "micro-batch, gradient checkpointing, LoRA, or a larger card (anchorgpu plan helps).", file=err)
            return 3
        raise
