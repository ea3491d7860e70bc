"""The restore proof: a fresh process loads the checkpoint, checks every fingerprint, runs the next step and
compares it with the step the original process ran.

``python -m anchorgpu.pilot.restore CHECKPOINT_DIR`` prints one JSON object:
``passed``, ``first_difference`` (what differs first, with both values) and
the detail of each check. On the CPU the next step must be identical to the
bit; on a GPU, kernels may pick another reduction order, so the loss and
each updated weight's norm must agree within ``GPU_TOLERANCE`` (relative).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

GPU_TOLERANCE = 1e-3
NEXT_STEP = "next_step.json"


def next_step_record(result, model) -> dict:
    """What the original process's next step produced: its loss and every updated trainable weight."""
    import torch

    from .checkpoint import digest
    from .model import trainable

    with torch.no_grad():
        weights = {name: {"sha256": digest(p), "norm": float(p.detach().double().norm())}
                   for name, p in trainable(model)}
    return {"loss": result.loss, "loss_hex": float(result.loss).hex(), "weights": weights}


def _compare_next(expected: dict, found: dict, exact: bool) -> dict | None:
    def close(a: float, b: float) -> bool:
        return a == b if exact else math.isclose(a, b, rel_tol=GPU_TOLERANCE, abs_tol=1e-12)

    if not close(expected["loss"], found["loss"]):
        return {"what": "next step loss", "expected": expected["loss"], "found": found["loss"]}
    for name, want in expected["weights"].items():
        got = found["weights"].get(name)
        if got is None:
            return {"what": f"next step weight {name}", "expected": "present", "found": "absent"}
        if exact and want["sha256"] != got["sha256"]:
            return {"what": f"next step weight {name}", "expected": want["sha256"], "found": got["sha256"]}
        if not close(want["norm"], got["norm"]):
            return {"what": f"next step weight {name} (norm)", "expected": want["norm"], "found": got["norm"]}
    return None


def prove(directory: str) -> dict:
    """Runs in the fresh process."""
    import torch

    from .checkpoint import fingerprints, load_into, read_meta
    from .data import Batches, load_dataset
    from .model import build_model, make_optimizer, make_scheduler, pick_device
    from .options import PilotOptions
    from .steps import train_step

    meta = read_meta(directory)
    options = PilotOptions.from_json(meta["options"]).replace(progress=False)
    torch.set_num_threads(int(meta.get("threads") or torch.get_num_threads()))
    device = torch.device("cpu") if meta["device"] == "cpu" else pick_device("cuda")
    built = build_model(options, device)
    dataset = load_dataset(options.data, options.text_field, options.model, int(built.config["vocab_size"]),
                           options.seq_len)
    changed = [p for p, h in meta.get("data_files", {}).items() if dataset.files.get(p) != h]
    if changed:
        return {"passed": False, "first_difference": {"what": f"data file {changed[0]}", "expected": "unchanged",
                                                      "found": "changed since the run"}}
    batches = Batches(dataset.train, options.micro_batch)
    optimizer = make_optimizer(options, built.model)
    scheduler = make_scheduler(options, optimizer)
    try:
        load_into(directory, model=built.model, optimizer=optimizer, scheduler=scheduler, batches=batches,
                  options=options)
    except (ValueError, KeyError, RuntimeError) as exc:
        return {"passed": False, "first_difference": {"what": "checkpoint contents", "expected": "loadable",
                                                      "found": str(exc)[:300]}}
    found = fingerprints(built.model, optimizer, scheduler, batches, device)
    expected = meta["manifest"]
    state_differences = [{"what": key, "expected": value, "found": found.get(key, "absent")}
                         for key, value in expected.items() if found.get(key) != value]
    state_differences += [{"what": key, "expected": "absent", "found": found[key]}
                          for key in found if key not in expected]
    step = train_step(built.model, optimizer, scheduler, batches, options, device)
    record = next_step_record(step, built.model)
    want = json.loads((Path(directory) / NEXT_STEP).read_text(encoding="utf-8"))
    step_difference = _compare_next(want, record, exact=device.type == "cpu")
    first = state_differences[0] if state_differences else step_difference
    return {
        "passed": first is None,
        "first_difference": first,
        "state_checked": len(expected),
        "state_differences": len(state_differences),
        "next_step": {"matches": step_difference is None, "loss": record["loss"], "expected_loss": want["loss"],
                      "comparison": "identical to the bit" if device.type == "cpu"
                      else f"within {GPU_TOLERANCE:g} relative (GPU kernels may reorder sums)"},
    }


def run_fresh(directory: str, timeout: float = 3600) -> dict:
    """Runs ``prove`` in a new Python process and returns its answer (a crash is a failed proof, with its cause)."""
    done = subprocess.run([sys.executable, "-m", "anchorgpu.pilot.restore", directory], capture_output=True,
                          text=True, timeout=timeout)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"passed": False, "first_difference": {"what": "restore process", "expected": "an answer",
                                                      "found": f"exit status {done.returncode}: {last[:300]}"}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m anchorgpu.pilot.restore CHECKPOINT_DIR", file=sys.stderr)
        return 2
    result = prove(argv[0])
    print(json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
