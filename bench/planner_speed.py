"""How fast the planner answers for today's large models: the analytic estimate and the per-layer simulation.

    .venv/bin/python bench/planner_speed.py [--whole] [case ...]   cases: llama-3.3-70b, qwen3-30b-a3b (default: both)

``--whole`` also simulates every layer of the model (tens of seconds) and prints whether the per-layer
extrapolation equals it to the byte.

For each case: the analytic answer's time (reading the config into a spec
and estimating; the median of many runs) and, in a fresh process, the
simulation's wall time and the peak resident memory of that process (host
memory: what the simulation costs the machine, since fake tensors allocate
nothing), with the simulated and the analytic live peaks side by side.
The step: LoRA (rank 16 on q/k/v/o), bf16 weights, sequence 4096,
micro-batch 1, gradient checkpointing, one card.

Targets (issue 21): analytic answer under 50 ms; each simulation under 10 s on 2 cores.

The configs are the models' published config.json files (public facts), written out here so that nothing is
downloaded: meta-llama/Llama-3.3-70B-Instruct and Qwen/Qwen3-30B-A3B.
"""

import json
import resource
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "llama-3.3-70b": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 8192, "initializer_range": 0.02, "intermediate_size": 28672,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 64,
        "num_hidden_layers": 80, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 128256,
    },
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
        "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
        "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936,
    },
}
SEQ_LEN = 4096
ANALYTIC_MS = 50.0
SIMULATION_S = 10.0
GiB = 2**30


def _setup():
    from anchorgpu.planner import TrainingSetup

    return TrainingSetup(method="lora", precision="bf16", seq_len=SEQ_LEN, micro_batch=1, grad_checkpointing=True)


def analytic(case: str) -> tuple[float, int]:
    """Median milliseconds of config -> spec -> estimate, and the analytic live peak."""
    from anchorgpu.planner import model_spec_from_config
    from anchorgpu.planner.analytic import estimate

    setup = _setup()
    times = []
    for _ in range(30):
        started = time.perf_counter()
        spec = model_spec_from_config(CONFIGS[case], name=case)
        result = estimate(spec, setup)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result.live


def simulation(case: str, whole: bool = False) -> dict:
    """Runs in its own process: the simulation's wall time and this process's peak RSS."""
    started = time.perf_counter()
    import torch

    from anchorgpu.planner import model_spec_from_config
    from anchorgpu.planner.simulate import layers_used, measure_step

    torch.set_num_threads(2)
    imports = time.perf_counter() - started
    spec = model_spec_from_config(CONFIGS[case], name=case)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    walls = []
    for _ in range(2):  # the first in a fresh process (transformers imports the model's code), then warm
        started = time.perf_counter()
        m = measure_step(spec, _setup(), fake=True, layers="auto")  # what simulate() runs, without the reserve
        walls.append(time.perf_counter() - started)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    check = None
    if whole:
        started = time.perf_counter()
        every = measure_step(spec, _setup(), fake=True, layers="whole")
        check = {"seconds": time.perf_counter() - started, "peak": every.peak,
                 "equal": (every.peak, every.categories, every.phases) == (m.peak, m.categories, m.phases)}
    return {"whole": check, "wall": walls[1], "cold": walls[0], "imports": imports, "rss": rss, "rss_before": before,
            "peak": m.peak, "phase": m.phase, "layers": layers_used(m), "categories": dict(m.categories), "notes": list(m.notes)}


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--simulate":
        print(json.dumps(simulation(sys.argv[2], whole="--whole" in sys.argv[3:])))
        return
    whole = "--whole" in sys.argv[1:]
    cases = [a for a in sys.argv[1:] if a != "--whole"] or list(CONFIGS)
    failed = False
    for case in cases:
        ms, analytic_live = analytic(case)
        done = subprocess.run([sys.executable, __file__, "--simulate", case] + (["--whole"] if whole else []),
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            print(f"{case}: simulation failed\n{done.stderr[-3000:]}")
            failed = True
            continue
        sim = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{case}: LoRA r16 q/k/v/o, bf16, seq {SEQ_LEN}, micro-batch 1, checkpointing, one card")
        print(f"  analytic answer   {ms:7.2f} ms (median of 30; target < {ANALYTIC_MS:.0f} ms)"
              f"   live peak {analytic_live / GiB:7.2f} GiB")
        print(f"  simulation        {sim['wall']:7.2f} s  (target < {SIMULATION_S:.0f} s, {sim['layers']} layers)"
              f"   live peak {sim['peak'] / GiB:7.2f} GiB in {sim['phase']}")
        print(f"  first in a fresh process {sim['cold']:.2f} s (after importing torch and the planner, "
              f"{sim['imports']:.1f} s)")
        print(f"  host memory       peak RSS {sim['rss'] / GiB:.2f} GiB "
              f"(after imports {sim['rss_before'] / GiB:.2f} GiB)")
        print("  simulated parts   " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in sim["categories"].items()) + " GiB")
        if sim["whole"]:
            same = "equal to the byte" if sim["whole"]["equal"] else "DIFFERENT"
            print(f"  every layer       {sim['whole']['seconds']:7.2f} s   live peak {sim['whole']['peak']:,} bytes: "
                  f"{same} (sampled {sim['peak']:,})")
            failed |= not sim["whole"]["equal"]
        for note in sim["notes"]:
            print(f"  note: {note}")
        failed |= ms >= ANALYTIC_MS or sim["wall"] >= SIMULATION_S
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
