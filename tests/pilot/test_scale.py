"""`anchorgpu pilot scale` on the CPU: a real 2-process scaling run over gloo (DDP and FSDP against the 1-process
baseline, at the same global batch), a hang stopped by the per-setting timeout, and bad input refused."""

import json

import pytest

from anchorgpu.pilot.command import run as pilot
from anchorgpu.pilot.scale import REPORT_KIND, UNBALANCED

# The smallest run that still accumulates: 2 micro-batches per step, one on each rank of a 2-process setting.
QUICK = ["--seq-len", "64", "--micro-batch", "1", "--grad-accum", "2", "--warmup", "1", "--steps", "2",
         "--precision", "fp32", "--no-progress"]


def scale(tmp_path, model, data, *more):
    report = tmp_path / "scale.json"
    code = pilot(["scale", "--model", model, "--data", data, *QUICK, "--report", str(report), *more])
    return code, report


def test_a_two_process_gloo_run_scales_ddp_and_fsdp_at_the_same_global_batch(tmp_path, tiny_model, tiny_data,
                                                                              capsys):
    # The timeout stops a hung rendezvous or collective, so a broken run fails here instead of stalling CI.
    code, path = scale(tmp_path, tiny_model, tiny_data, "--nproc", "1,2", "--parallel", "ddp,fsdp",
                       "--backend", "gloo", "--timeout", "240")
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    report = json.loads(path.read_text())
    assert report["kind"] == REPORT_KIND and report["schema_version"] == 1 and report["backend"] == "gloo"
    assert report["definitions"]["unbalanced_threshold"] == UNBALANCED
    assert report["versions"]["torch"]
    settings = {(s["parallel"], s["processes"]): s for s in report["settings"]}
    assert list(settings) == [("single", 1), ("ddp", 2), ("fsdp", 2)]
    assert report["global_batch"]["samples_per_step"] == 2
    for (parallel, n), setting in settings.items():
        assert setting["status"] == "ok"
        assert setting["samples_per_step"] == 2  # the same global batch everywhere
        assert setting["grad_accum_per_rank"] == 2 // n
        assert setting["tokens_per_s"] > 0 and setting["samples_per_s"] > 0
        assert setting["step_time_s"]["median"] > 0 and len(setting["step_time_s"]["per_step"]) == 2
        assert setting["efficiency"] > 0
        memory = setting["peak_memory"]
        assert [m["rank"] for m in memory] == list(range(n))
        assert all(m["bytes"] > 10 * 1024**2 and "ru_maxrss" in m["source"] for m in memory)
        assert isinstance(setting["unbalanced"], bool)
    assert settings[("single", 1)]["efficiency"] == 1.0
    # The ranks together take the single process's micro-batches, so the steps see the same tokens.
    tokens = {s["tokens_per_step"] for s in settings.values()}
    assert len(tokens) == 1
    out = captured.out
    assert "tokens/s" in out and "efficiency" in out and "baseline" in out and "fsdp" in out
    assert "starting" in captured.err and "done in" in captured.err


def test_a_setting_that_overruns_its_timeout_is_reported_failed_and_the_others_still_run(tmp_path, tiny_model,
                                                                                          tiny_data, capsys):
    code, path = scale(tmp_path, tiny_model, tiny_data, "--nproc", "2", "--parallel", "ddp", "--timeout", "0.5")
    captured = capsys.readouterr()
    assert code == 1
    settings = json.loads(path.read_text())["settings"]
    assert [(s["parallel"], s["status"]) for s in settings] == [("single", "failed"), ("ddp", "failed")]
    assert all("timed out after 0.5 s" in s["error"] and "log_tail" in s for s in settings)
    assert "FAILED: timed out" in captured.out and "Traceback" not in captured.out


def test_a_crashing_setting_is_reported_with_its_reason_not_a_traceback(tmp_path, tiny_model, tiny_data, capsys):
    code, path = scale(tmp_path, tiny_model, tiny_data, "--nproc", "1", "--method", "lora",
                       "--lora-targets", "not_a_layer", "--timeout", "120")
    out = capsys.readouterr().out
    assert code == 1
    [setting] = json.loads(path.read_text())["settings"]
    assert setting["status"] == "failed" and setting["error"].startswith("rank 0: lora_targets: “not_a_layer”")
    assert setting["log_tail"] and "FAILED: rank 0: lora_targets" in out and "Traceback" not in out


@pytest.mark.parametrize("more, message", [
    (["--nproc", "1,3"], "--grad-accum 2 cannot be split over 3 processes at the same global batch"),
    (["--nproc", "0"], "is not a list of process counts"),
    (["--nproc", "x"], "is not a list of process counts"),
    (["--parallel", "tp"], "is not a list of ddp and fsdp"),
    (["--timeout", "0"], "seconds above 0"),
    (["--seq-len", "512"], "longer than the 256 positions"),
])
def test_bad_input_is_refused_with_a_message_and_exit_2(tmp_path, tiny_model, tiny_data, capsys, more, message):
    code, path = scale(tmp_path, tiny_model, tiny_data, *more)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not path.exists()


def test_nccl_is_refused_on_the_cpu(tmp_path, tiny_model, tiny_data, capsys):
    code, _path = scale(tmp_path, tiny_model, tiny_data, "--device", "cpu", "--backend", "nccl")
    assert code == 2 and "nccl needs CUDA" in capsys.readouterr().err
