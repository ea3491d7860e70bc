"""Bad input ends in one clear sentence and exit code 2: no traceback, nothing half-written."""

import json
import subprocess
import sys

import pytest

from anchorgpu.pilot.command import run as pilot

BASE = ["--seq-len", "32", "--warmup", "0", "--steps", "1", "--precision", "fp32", "--no-progress"]


def test_a_missing_model_directory(tmp_path, tiny_data, capsys):
    code = pilot(["run", "--model", str(tmp_path / "nowhere"), "--data", tiny_data, *BASE])
    err = capsys.readouterr().err
    assert code == 2 and "there is no model at" in err and "Traceback" not in err


@pytest.mark.parametrize("make, text", [
    (lambda p: p, "no data file"),  # does not exist
    (lambda p: (p.write_bytes(b"\xff\xfe\x00bad"), p)[1], "not UTF-8"),
    (lambda p: (p.write_text('{"text": "fine"}\n{broken\n'), p)[1], "line 2 is not JSON"),
    (lambda p: (p.write_text('{"body": "no text field"}\n'), p)[1], "--text-field"),
    (lambda p: (p.write_text("\n\n"), p)[1], "no examples"),
])
def test_unreadable_data(tmp_path, tiny_model, capsys, make, text):
    data = make(tmp_path / "data.jsonl")
    code = pilot(["run", "--model", tiny_model, "--data", str(data), *BASE,
                  "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and text in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_a_sequence_longer_than_the_model_allows(tmp_path, tiny_model, tiny_data, capsys):
    code = pilot(["run", "--model", tiny_model, "--data", tiny_data, *BASE, "--seq-len", "4096"])
    err = capsys.readouterr().err
    assert code == 2 and "4096 tokens is longer than the 256 positions" in err


def test_a_lora_target_the_model_does_not_have(tmp_path, tiny_model, tiny_data, capsys):
    code = pilot(["run", "--model", tiny_model, "--data", tiny_data, *BASE, "--method", "lora",
                  "--lora-targets", "q_proj,query_key_value"])
    err = capsys.readouterr().err
    assert code == 2 and "“query_key_value” is not a linear layer" in err and "q_proj" in err


@pytest.mark.parametrize("args, text", [
    (["--steps", "0"], "steps: must be at least 1"),
    (["--micro-batch", "-2"], "micro_batch: must be at least 1"),
    (["--lr", "5"], "learning rate"),
])
def test_nonsense_numbers(tmp_path, tiny_model, tiny_data, capsys, args, text):
    code = pilot(["run", "--model", tiny_model, "--data", tiny_data, *BASE, *args])
    assert code == 2 and text in capsys.readouterr().err


def test_a_config_that_is_not_a_model(tmp_path, tiny_data, capsys):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hello": "world"}))
    code = pilot(["run", "--model", str(bad), "--data", tiny_data, *BASE])
    assert code == 2 and "not a Hugging Face model config" in capsys.readouterr().err


def test_the_installed_command_exits_2_without_a_traceback(tmp_path, tiny_data):
    done = subprocess.run([sys.executable, "-m", "anchorgpu.cli", "pilot", "run", "--model", str(tmp_path / "x"),
                           "--data", tiny_data], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "there is no model" in done.stderr and "Traceback" not in done.stderr


def test_a_report_that_is_not_a_pilot_report(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    assert pilot(["summary", str(other)]) == 2 and "not a pilot report" in capsys.readouterr().err
