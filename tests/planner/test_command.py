"""`anchorgpu plan`: JSON for scripts, a table for people, clear refusals."""

from __future__ import annotations

import io
import json

import pytest

from anchorgpu.planner.command import run
from anchorgpu.planner.recommend import Offer


def plan(*argv, offers=None):
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out=out, err=err, offers=offers if offers is not None else [
        Offer.from_gb("h100-sxm-80gb", "H100 SXM 80 GB", 80, 1, (1, 2, 4, 8)),
        Offer.from_gb("h200-141gb", "H200 141 GB", 141, 1, (1, 2, 4, 8))])
    return code, out.getvalue(), err.getvalue()


def test_json_holds_the_agreed_fields():
    code, out, _ = plan("--preset", "llama-3.1-8b", "--method", "lora", "--grad-checkpointing", "--json")
    data = json.loads(out)
    assert code == 0 and data["engine"] == "analytic"
    assert set(data["breakdown"]) == {"weights", "gradients", "optimizer", "activations", "temporaries", "reserve"}
    assert data["peak_bytes_per_device"] == sum(data["breakdown"].values())
    first = data["recommendations"][0]
    assert {"product", "quantity", "fits", "headroom_fraction", "price"} <= set(first)
    assert any(r["fits"] for r in data["recommendations"])


def test_full_fine_tuning_of_an_8b_model_does_not_fit_one_80_gb_card():
    code, out, _ = plan("--preset", "llama-3.1-8b", "--json")
    rows = {(r["product"], r["quantity"]): r for r in json.loads(out)["recommendations"]}
    assert code == 0 and not rows[("h100-sxm-80gb", 1)]["fits"]
    assert rows[("h100-sxm-80gb", 1)]["overflow"] in {"optimizer", "gradients", "weights", "activations"}


def test_the_table_is_for_people():
    code, out, _ = plan("--preset", "llama-3.2-1b", "--method", "lora")
    assert code == 0 and "peak" in out and "h200-141gb" in out and "weights" in out


@pytest.mark.parametrize("argv, text", [
    (["--preset", "no-such-model"], "no preset"),
    (["--preset", "llama-3.2-1b", "--seq-len", "999999"], "longer than"),
    (["--preset", "llama-3.2-1b", "--seq-len", "0"], "seq_len"),
    (["--preset", "llama-3.2-1b", "--method", "lora", "--lora-targets", "nonexistent_proj"], "nonexistent_proj"),
    (["--preset", "llama-3.2-1b", "--parallel", "fsdp", "--gpus", "1"], "gpus"),
    (["--config", "/nonexistent/config.json"], "config"),
])
def test_bad_input_is_a_message_and_exit_code_2(argv, text):
    code, out, err = plan(*argv)
    assert code == 2 and out == "" and text in err and "Traceback" not in err


@pytest.mark.django_db
def test_prices_come_from_the_shops_price_list(capsys):
    from tests import shop

    shop.load_shop()
    code = run(["--preset", "llama-3.2-1b", "--method", "lora", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    h100 = next(r for r in data["recommendations"] if r["product"] == "h100-sxm-80gb" and r["quantity"] == 1)
    assert h100["price"]["7"] and float(h100["price"]["7"]) > 0


def test_the_simulation_engine_from_the_command_line():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    code, out, err = plan("--preset", "tiny-llama", "--method", "lora", "--precision", "bf16", "--seq-len", "64",
                          "--engine", "simulate", "--json")
    data = json.loads(out)
    assert code == 0 and data["engine"] == "simulate" and "simulating" in err
    assert data["peak_bytes_per_device"] == sum(data["breakdown"].values()) > 0
