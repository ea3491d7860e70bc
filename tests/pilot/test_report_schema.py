"""Checking an uploaded pilot report: a real one passes with its key figures; cut, foreign, oversized, badly
encoded, wrongly versioned or incomplete files are refused with a code that says why."""

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorgpu.pilot.command import run as pilot
from anchorgpu.pilot.errors import PilotInputError
from anchorgpu.pilot.report_schema import (
    MAX_REPORT_BYTES,
    REQUIRED,
    ReportRejected,
    read_report,
    summarise,
    validate_report,
)
from anchorgpu.pilot.summary import load_report

# Written by `anchorgpu pilot run` on the tiny Llama of conftest.py on a CPU (paths shortened).
FIXTURE = Path(__file__).parent / "fixtures" / "report_cpu_tiny_llama.json"
RAW = FIXTURE.read_bytes()
REPORT = json.loads(RAW)


def _bytes(report) -> bytes:
    return json.dumps(report, indent=2).encode()


def _code(data: bytes, **kwargs) -> ReportRejected:
    with pytest.raises(ReportRejected) as caught:
        validate_report(data, **kwargs)
    return caught.value


def _changed(**changes) -> dict:
    report = copy.deepcopy(REPORT)
    for path, value in changes.items():
        *parents, name = path.split("__")
        holder = report
        for part in parents:
            holder = holder[part]
        holder[name] = value
    return report


def test_a_real_report_gives_the_shop_its_key_figures():
    summary = validate_report(RAW)
    assert summary.tokens_per_s == REPORT["tokens_per_s"] and summary.schema_version == 1
    assert summary.peak_memory_kind == "peak_rss" and summary.peak_memory_bytes == REPORT["memory"]["peak_rss"]["bytes"]
    steps = sorted(REPORT["step_time_s"]["per_step"])
    assert summary.step_time_p50_s == REPORT["step_time_s"]["median"] == steps[1]
    assert summary.step_time_p95_s == pytest.approx(steps[1] + 0.9 * (steps[2] - steps[1]))
    assert summary.timed_steps == 3 and summary.data_wait_share == REPORT["data_wait_s"]["share_of_step_time"]
    assert summary.restore.status == "passed" and summary.restore.first_difference is None
    assert summary.device_type == "cpu" and summary.device_count == 1 and summary.device_name.startswith("cpu")
    assert summary.checkpoint_bytes == 1550101 and summary.samples_per_step == 4 and summary.tokens_per_step == 128
    assert summary.stack is None and summary.warnings == (REPORT["warnings"][0],)


def test_a_report_the_kit_writes_now_passes(tmp_path, tiny_model, tiny_data, capsys):
    path = tmp_path / "report.json"
    code = pilot(["run", "--model", tiny_model, "--data", tiny_data, "--seq-len", "32", "--micro-batch", "2",
                  "--grad-accum", "2", "--warmup", "1", "--steps", "3", "--val-batches", "1", "--precision", "fp32",
                  "--no-progress", "--no-restore-check", "--checkpoint-dir", str(tmp_path / "ckpt"),
                  "--report", str(path)])
    assert code == 0, capsys.readouterr()
    summary = validate_report(path.read_bytes())
    assert summary.tokens_per_s > 0 and summary.timed_steps == 3 and summary.peak_memory_bytes > 10 * 1024**2
    assert summary.restore.status == "skipped" and summary.restore.skipped_because == "--no-restore-check"


def test_a_gpu_report_takes_the_allocator_peak_and_passes_the_stack_through():
    stack = {"record_version": 1, "devices": [{"name": "NVIDIA H200", "memory_bytes": 150_000_000_000}]}
    report = _changed(memory={
        "peak_allocated": {"bytes": 61_000_000_000, "source": "torch.cuda.max_memory_allocated (timed steps)"},
        "peak_reserved": {"bytes": 64_000_000_000, "source": "torch.cuda.max_memory_reserved (timed steps)"},
        "device_used_peak": {"bytes": 66_500_000_000, "source": "NVML"}, "over_steps": []},
        device={"type": "cuda", "count": 2}, versions__device="NVIDIA H200", stack=stack)
    summary = validate_report(_bytes(report))
    assert summary.peak_memory_kind == "peak_allocated" and summary.peak_memory_bytes == 61_000_000_000
    assert summary.device_used_peak_bytes == 66_500_000_000
    assert (summary.device_type, summary.device_name, summary.device_count) == ("cuda", "NVIDIA H200", 2)
    assert summary.stack == stack
    assert _code(_bytes(_changed(stack="H200, CUDA 12.8"))).code == "bad_type"


def test_a_failed_restore_proof_keeps_its_first_difference():
    first = {"what": "optimizer state exp_avg", "expected": "ab12", "found": "cd34"}
    summary = validate_report(_bytes(_changed(restore={"passed": False, "first_difference": first})))
    assert summary.restore.status == "failed" and summary.restore.first_difference == first
    assert _code(_bytes(_changed(restore={"passed": False}))).field == "restore.first_difference"
    assert _code(_bytes(_changed(restore={"passed": "yes"}))).code == "bad_type"
    assert _code(_bytes(_changed(restore={}))).field == "restore.passed"


@pytest.mark.parametrize("version", [2, 0, "1", 1.5, True, None])
def test_a_report_of_another_schema_version_is_refused(version):
    rejected = _code(_bytes(_changed(schema_version=version)))
    assert rejected.code == "schema_version" and repr(version) in rejected.message


def test_every_proper_cut_of_a_report_is_called_truncated():
    compact = json.dumps(REPORT).encode()
    for source in (RAW, compact):
        for end in range(1, len(source)):
            if source[:end].strip():
                assert _code(source[:end]).code == "truncated", source[:end][-40:]
    assert _code(b"").code == "not_json" and _code(b"  \n").code == "not_json"


@pytest.mark.parametrize("data", [b"hello", b"<html><body>pilot</body></html>", b"[1, 2,]", b"{'kind': 1}",
                                  b'{"a": 1}}', b"\x00\x01"])
def test_text_that_is_not_json_is_refused(data):
    rejected = _code(data)
    assert rejected.code == "not_json" and "not JSON" in rejected.message


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 200_000])
def test_nesting_too_deep_for_the_decoder_is_not_json(data):
    assert _code(data).code == "not_json"


def test_the_size_limit_counts_bytes_and_allows_exactly_the_limit():
    at_limit = RAW + b" " * (MAX_REPORT_BYTES - len(RAW))
    assert len(at_limit) == MAX_REPORT_BYTES and validate_report(at_limit).tokens_per_s > 0
    rejected = _code(at_limit + b" ")
    assert rejected.code == "too_large" and f"{MAX_REPORT_BYTES:,}" in rejected.message
    assert _code(RAW, max_bytes=1000).code == "too_large"
    assert validate_report(RAW, max_bytes=None).timed_steps == 3


def test_bytes_that_are_not_utf8_are_refused_and_a_bom_is_accepted():
    assert _code(RAW.decode().encode("utf-16")).code == "not_utf8"
    assert _code(b'{"kind": "\xff"}').code == "not_utf8"
    assert validate_report(b"\xef\xbb\xbf" + RAW).tokens_per_s == REPORT["tokens_per_s"]


@pytest.mark.parametrize("foreign", [{"hello": "world"}, [1, 2], "a string", 42, None,
                                     {"kind": "other-report", "schema_version": 1}])
def test_json_that_is_not_a_pilot_report_is_refused(foreign):
    assert _code(json.dumps(foreign).encode()).code == "not_a_report"


def test_the_report_of_pilot_scale_is_named():
    scale = {"schema_version": 1, "kind": "anchorgpu-pilot-report", "settings": [], "device": {"type": "cpu"}}
    rejected = _code(json.dumps(scale).encode())
    assert rejected.code == "scale_report" and "pilot run" in rejected.message


@pytest.mark.parametrize("path", sorted(REQUIRED))
def test_each_required_field_is_checked_for_presence_and_type(path):
    report = copy.deepcopy(REPORT)
    *parents, name = path.split(".")
    holder = report
    for part in parents:
        holder = holder[part]
    wrong = 1 if REQUIRED[path] in ("a string", "an object", "a list") else "many"
    holder[name] = wrong
    rejected = _code(_bytes(report))
    assert (rejected.code, rejected.field) == ("bad_type", path)
    del holder[name]
    rejected = _code(_bytes(report))
    assert (rejected.code, rejected.field) == ("missing_field", path)


def test_counts_are_whole_numbers_and_flags_are_not_numbers():
    assert _code(_bytes(_changed(checkpoint__bytes=1.5))).field == "checkpoint.bytes"
    assert _code(_bytes(_changed(tokens_per_s=True))).code == "bad_type"


@pytest.mark.parametrize("changes, field", [
    ({"tokens_per_s": 0}, "tokens_per_s"),
    ({"tokens_per_s": -3.0}, "tokens_per_s"),
    ({"step_time_s__median": -0.1}, "step_time_s.median"),
    ({"step_time_s__per_step": []}, "step_time_s.per_step"),
    ({"step_time_s__per_step": [0.1, "slow"]}, "step_time_s.per_step"),
    ({"device__count": 0}, "device.count"),
])
def test_impossible_values_are_refused(changes, field):
    rejected = _code(_bytes(_changed(**changes)))
    assert (rejected.code, rejected.field) == ("bad_value", field)


def test_a_non_finite_throughput_is_refused_but_a_diverged_loss_is_still_a_report():
    text = RAW.decode().replace(f'"tokens_per_s": {REPORT["tokens_per_s"]!r},', '"tokens_per_s": NaN,', 1)
    assert _code(text.encode()).field == "tokens_per_s"
    assert math.isnan(read_report(_bytes(_changed(validation__loss=float("nan"))))["validation"]["loss"])


def test_no_peak_memory_is_a_missing_field():
    rejected = _code(_bytes(_changed(memory={"over_steps": []})))
    assert rejected.code == "missing_field" and "peak memory" in rejected.message
    assert _code(_bytes(_changed(memory={"peak_rss": {"bytes": "big"}}))).field == "memory.peak_rss.bytes"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_either_a_report_or_refused_with_a_known_code(data):
    try:
        summarise(read_report(data))
    except ReportRejected as exc:
        assert exc.code in {"too_large", "not_utf8", "truncated", "not_json", "not_a_report", "schema_version",
                            "scale_report", "missing_field", "bad_type", "bad_value"}
        assert exc.message


def test_the_cli_reader_keeps_its_messages(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_bytes(RAW[:500])
    with pytest.raises(PilotInputError, match="is not JSON"):
        load_report(str(cut))
    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}')
    with pytest.raises(PilotInputError, match="not a pilot report"):
        load_report(str(other))
    partial = tmp_path / "partial.json"
    partial.write_bytes(_bytes(_changed(restore={})))
    with pytest.raises(PilotInputError, match="restore.passed"):
        load_report(str(partial))
    big = tmp_path / "big.json"
    big.write_bytes(RAW + b" " * MAX_REPORT_BYTES)  # a local file has no size limit
    assert load_report(str(big))["tokens_per_s"] == REPORT["tokens_per_s"]


def test_the_checker_imports_neither_torch_nor_django():
    code = ("import sys\nimport anchorgpu.pilot.report_schema\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'django'})))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
