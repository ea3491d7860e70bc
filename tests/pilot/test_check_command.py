"""`anchorgpu pilot check`: exit codes, the readable report and its JSON, and the stack in a pilot report's summary."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchorgpu.pilot.command import run as pilot
from anchorgpu.pilot.summary import terminal_summary, write_html

STACKS = Path(__file__).parent / "stacks"


def test_a_recorded_h200_passes_and_the_json_holds_the_record(tmp_path, capsys):
    out = tmp_path / "check.json"
    code = pilot(["check", "--record", str(STACKS / "h200-141gb.json"), "--product", "h200-141gb",
                  "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "GPU1  NVIDIA H200  140.4 GiB  compute capability 9.0" in text and "GPU0: GPU1 NV18" in text
    assert "NCCL 2.26.2" in text and "Result: PASSED" in text
    report = json.loads(out.read_text())
    assert report["kind"] == "anchorgpu-pilot-check" and report["schema_version"] == 1 and report["passed"] is True
    assert report["stack"]["verdict"]["product"] == "h200-141gb" and report["stack"]["arch_list"][3] == "sm_90"
    assert report["operations"] == [] and "saved record" in report["operations_note"]
    # A saved report can be judged again, against another product.
    assert pilot(["check", "--record", str(out), "--product", "b200-lot-2x180gb"]) == 1


@pytest.mark.parametrize("name, text", [
    ("mismatch-b200-without-sm100", "no kernels for sm_100"),
    ("mismatch-mi300x-cuda-build", "install the ROCm build"),
    ("mismatch-mi300x-rocm-without-gfx942", "no code objects for gfx942"),
    ("mismatch-h100-cpu-build", "CPU-only build"),
    ("mismatch-no-devices", "no GPU is visible"),
])
def test_mismatched_records_exit_1_with_the_reason(capsys, name, text):
    assert pilot(["check", "--record", str(STACKS / f"{name}.json")]) == 1
    out = capsys.readouterr().out
    assert text in out and "Result: FAILED" in out


@pytest.mark.parametrize("args, text", [
    (["--product", "h300"], "invalid choice: 'h300'"),
    (["--extension-call", "no_colon_here"], "is not MODULE:FUNCTION"),
])
def test_bad_usage_exits_2(capsys, args, text):
    with pytest.raises(SystemExit) as exit_:
        pilot(["check", "--skip-ops", *args])
    assert exit_.value.code == 2 and text in capsys.readouterr().err


@pytest.mark.parametrize("content, text", [(None, "cannot be read"), ("{broken", "is not JSON"),
                                           ('{"kind": "something else"}', "is not a stack record")])
def test_a_bad_record_file_exits_2_without_a_traceback(tmp_path, capsys, content, text):
    path = tmp_path / "record.json"
    if content is not None:
        path.write_text(content)
    assert pilot(["check", "--record", str(path)]) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err


def test_this_cpu_machine_fails_the_stack_but_runs_every_operation_on_the_cpu(tmp_path, capsys):
    (tmp_path / "customer_ext.py").write_text("def self_test():\n    return 'ok'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        code = pilot(["check", "--extension", "customer_ext", "--extension", "not_installed_ext",
                      "--extension-call", "customer_ext:self_test", "--json", str(tmp_path / "c.json")])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("customer_ext", None)
    out = capsys.readouterr().out
    assert code == 1  # no GPU here: the stack check fails whatever the operations do
    report = json.loads((tmp_path / "c.json").read_text())
    results = {op["name"]: op for op in report["operations"]}
    for name in ("bf16 matmul", "sdpa forward+backward", "all-reduce", "import customer_ext",
                 "call customer_ext:self_test"):
        assert results[name]["passed"] is True, results[name]
        assert results[name]["seconds"] > 0
    assert results["all-reduce"]["device"] == "cpu x2" and results["all-reduce"]["detail"]["backend"] == "gloo"
    assert results["import not_installed_ext"]["passed"] is False
    assert "on the CPU: no GPU is visible" in out and "FAIL  import not_installed_ext" in out


def test_the_command_runs_where_django_is_not_configured(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = ("import sys\nfrom anchorgpu.cli import main\n"
            f"rc = main(['pilot', 'check', '--record', {str(STACKS / 'mi300x-192gb.json')!r}])\n"
            "print('django loaded' if 'django' in sys.modules else 'no django')\nsys.exit(rc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gfx942" in done.stdout and done.stdout.strip().endswith("no django")


def _minimal_report(stack=None) -> dict:
    steps = {"median": 0.1, "p90": 0.1, "min": 0.1, "max": 0.1, "spread": 0.0, "per_step": [0.1, 0.1]}
    report = {"schema_version": 1, "kind": "anchorgpu-pilot-report", "created_at": "2026-11-30T00:00:00+00:00",
              "model": {"source": "m", "family": "llama", "parameters": 10, "trainable_parameters": 10},
              "versions": {"device": "cpu"}, "step_time_s": steps,
              "data_wait_s": {"total": 0.0, "share_of_step_time": 0.0}, "tokens_per_s": 1.0,
              "throughput": {"samples_per_hour": 1.0}, "memory": {}, "validation": {"batches": 1, "seconds": 0.1,
                                                                                   "loss": 1.0},
              "checkpoint": {"bytes": 10, "write_s": 0.1}, "restore": {"passed": True}, "warnings": []}
    if stack is not None:
        report["stack"] = stack
    return report


def test_the_pilot_summary_shows_the_stack_briefly_and_reads_reports_without_one(tmp_path, capsys):
    pilot(["check", "--record", str(STACKS / "mismatch-b200-without-sm100.json"), "--json", str(tmp_path / "c.json")])
    stack = json.loads((tmp_path / "c.json").read_text())["stack"]
    text = terminal_summary(_minimal_report(stack))
    assert "stack         PyTorch 2.6.0+cu126 (CUDA 12.6), driver 570.133.20, NCCL 2.21.5" in text
    assert "devices       2 x NVIDIA B200 (179.1 GiB)" in text
    assert "stack check   FAILED: B200 lot, 2 x 180 GB needs a build for CUDA 12.8" in text and "(and 1 more)" in text
    write_html(_minimal_report(stack), str(tmp_path / "r.html"))
    assert "Stack check" in (tmp_path / "r.html").read_text()
    older = terminal_summary(_minimal_report())
    assert "stack" not in older and "restore       PASSED" in older


def test_a_machine_without_pytorch_gets_a_failed_check_not_a_traceback(tmp_path):
    code = ("import sys\nsys.modules['torch'] = None  # as if PyTorch were not installed\n"
            "from anchorgpu.cli import main\nsys.exit(main(['pilot', 'check']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "PyTorch cannot be imported" in done.stdout and "not run: PyTorch cannot be imported" in done.stdout
    assert "Traceback" not in done.stderr
