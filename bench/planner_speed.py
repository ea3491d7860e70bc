"""Times the simulation engine on a Llama-3.1-70B-shaped LoRA step (fake tensors: nothing allocated).

    .venv/bin/python bench/planner_speed.py [preset] [seq_len]

Prints the wall time, the peak resident memory of this process and the simulated breakdown.
Target (issue 5): under 60 s and under 4 GB of host memory on 2 cores.
"""

import resource
import sys
import time

from anchorgpu.planner import TrainingSetup, preset_spec
from anchorgpu.planner.analytic import GiB, estimate
from anchorgpu.planner.simulate import simulate


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-70b"
    seq = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    spec = preset_spec(name)
    setup = TrainingSetup(method="lora", precision="bf16", seq_len=seq, micro_batch=1, grad_checkpointing=True)
    started = time.perf_counter()
    result = simulate(spec, setup, progress=lambda m: print(f"  {time.perf_counter() - started:6.1f} s  {m.english()}",
                                                            flush=True))
    wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    b = result.breakdown
    print(f"{name}, LoRA r{setup.lora_rank} on {','.join(setup.lora_targets)}, bf16, seq {seq}, micro-batch 1, "
          "checkpointing")
    print(f"wall time {wall:.1f} s, peak RSS {rss / GiB:.2f} GiB")
    print(f"simulated live peak {result.measurement.peak / GiB:.2f} GiB in {b.phase}; "
          + ", ".join(f"{k} {v / GiB:.2f}" for k, v in b.components().items()) + " GiB")
    a = estimate(spec, setup)
    print(f"analytic live peak {a.live / GiB:.2f} GiB in {a.phase}; "
          + ", ".join(f"{k} {v / GiB:.2f}" for k, v in a.components().items()) + " GiB")


if __name__ == "__main__":
    main()
