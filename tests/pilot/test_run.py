"""`anchorgpu pilot run` on a tiny model on the CPU: a complete report, a restore proof that passes, and one
that fails and names what differs when the checkpoint is tampered with."""

import json
from pathlib import Path

import torch

from anchorgpu.pilot import restore
from anchorgpu.pilot.command import run as pilot
from anchorgpu.pilot.summary import load_report

QUICK = ["--seq-len", "32", "--micro-batch", "2", "--grad-accum", "2", "--warmup", "1", "--steps", "3",
         "--val-batches", "1", "--precision", "fp32", "--no-progress", "--lr", "0.001"]


def run(tmp_path, model, data, *more, capsys=None):
    report = tmp_path / "report.json"
    code = pilot(["run", "--model", model, "--data", data, *QUICK, "--checkpoint-dir", str(tmp_path / "ckpt"),
                  "--report", str(report), *more])
    return code, report


def test_a_full_run_writes_a_complete_report_and_the_restore_passes(tmp_path, tiny_model, tiny_data, capsys):
    code, path = run(tmp_path, tiny_model, tiny_data, "--html", str(tmp_path / "report.html"))
    out = capsys.readouterr().out
    assert code == 0, out
    report = load_report(str(path))
    assert report["schema_version"] == 1
    steps = report["step_time_s"]
    assert len(steps["per_step"]) == 3 and 0 < steps["min"] <= steps["median"] <= steps["p90"] <= steps["max"]
    assert len(report["data_wait_s"]["per_step"]) == 3 and report["data_wait_s"]["total"] > 0
    memory = report["memory"]
    assert memory["peak_rss"]["bytes"] > 10 * 1024**2 and "ru_maxrss" in memory["peak_rss"]["source"]
    assert len(memory["over_steps"]) == 3
    assert report["tokens_per_s"] > 0 and report["throughput"]["samples_per_step"] == 4
    checkpoint = report["checkpoint"]
    assert checkpoint["write_s"] > 0 and checkpoint["bytes"] == sum(p.stat().st_size
                                                                    for p in Path(checkpoint["path"]).iterdir()
                                                                    if p.name != restore.NEXT_STEP)
    assert report["restore"]["passed"] is True and report["restore"]["first_difference"] is None
    assert report["restore"]["next_step"]["comparison"] == "identical to the bit"
    assert report["restore"]["state_checked"] > 20  # weights, optimizer moments, scheduler, random states, data
    versions = report["versions"]
    assert versions["torch"] == torch.__version__ and versions["python"] and versions["transformers"]
    assert report["model"]["weights"] == "random (seed 0)" and len(report["model"]["config_sha256"]) == 64
    assert list(report["data"]["files"].values())[0] and report["validation"]["seconds"] > 0
    assert report["data"]["validation_held_out"] is True
    assert "restore       PASSED" in out and "step time" in out
    stack = report["stack"]  # the stack check's record, under an optional key of schema version 1
    assert stack["torch_version"] == torch.__version__ and stack["verdict"]["findings"]
    assert "stack         PyTorch " + torch.__version__ in out
    page = (tmp_path / "report.html").read_text()
    assert page.count("<svg") == 2 and "Restore proof" in page


def test_lora_keeps_only_the_adapters_and_restores_the_base_from_the_model(tmp_path, tiny_model, tiny_data, capsys):
    code, path = run(tmp_path, tiny_model, tiny_data, "--method", "lora", "--lora-rank", "4", "--lora-targets",
                     "q_proj,v_proj", "--optimizer", "sgd")
    assert code == 0, capsys.readouterr()
    report = load_report(str(path))
    weights = torch.load(Path(report["checkpoint"]["path"]) / "model.pt", weights_only=True)
    assert weights and all("lora_" in name for name in weights)
    assert report["model"]["trainable_parameters"] < report["model"]["parameters"] / 10
    assert report["restore"]["passed"] is True


def _tamper_then_prove(tmp_path, tiny_model, tiny_data, tamper):
    code, _path = run(tmp_path, tiny_model, tiny_data, "--no-restore-check")
    assert code == 0
    directory = tmp_path / "ckpt"
    assert restore.run_fresh(str(directory))["passed"] is True  # untouched, it passes
    tamper(directory)
    return restore.run_fresh(str(directory))


def test_a_corrupted_optimizer_state_fails_the_proof_and_is_named(tmp_path, tiny_model, tiny_data):
    def tamper(directory):
        state = torch.load(directory / "optimizer.pt", weights_only=True)
        first = sorted(state["state"])[0]
        state["state"][first]["exp_avg"].mul_(1.001)
        torch.save(state, directory / "optimizer.pt")

    result = _tamper_then_prove(tmp_path, tiny_model, tiny_data, tamper)
    assert result["passed"] is False
    assert result["first_difference"]["what"].startswith("optimizer state") and \
        result["first_difference"]["what"].endswith("exp_avg")
    assert result["next_step"]["matches"] is False  # and the next step comes out differently


def test_a_moved_data_position_fails_the_proof_and_is_named(tmp_path, tiny_model, tiny_data):
    def tamper(directory):
        meta = json.loads((directory / "pilot.json").read_text())
        meta["data"]["position"] += 1
        (directory / "pilot.json").write_text(json.dumps(meta))

    result = _tamper_then_prove(tmp_path, tiny_model, tiny_data, tamper)
    assert result["passed"] is False and result["first_difference"]["what"] == "data position"
    assert int(result["first_difference"]["found"]) == int(result["first_difference"]["expected"]) + 1


def test_a_lost_random_state_fails_the_proof(tmp_path, tiny_model, tiny_data):
    def tamper(directory):
        states = torch.load(directory / "rng.pt", weights_only=False)
        states["torch_cpu"] = torch.manual_seed(1234).get_state()
        torch.save(states, directory / "rng.pt")

    result = _tamper_then_prove(tmp_path, tiny_model, tiny_data, tamper)
    assert result["passed"] is False and result["first_difference"]["what"] == "random state torch cpu"
