"""bench/chain_watch.py still runs: a small size of it, in a subprocess, on its own SQLite file and anvil node."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.chains import evm_support

BENCH = evm_support.REPO_ROOT / "bench" / "chain_watch.py"


@pytest.fixture
def anvil_binary() -> str:
    try:
        return evm_support.find_anvil()
    except evm_support.AnvilMissing as exc:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{exc}. Under CI the anvil tests must run, not skip.", pytrace=False)
        pytest.skip(str(exc))


def test_the_chain_watch_bench_runs_and_prints_its_figures(anvil_binary):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL"} and not k.startswith("ANCHORGPU_WATCH_")}
    env["ANCHORGPU_ANVIL"] = anvil_binary
    done = subprocess.run([sys.executable, str(BENCH), "--orders", "20", "--history", "5", "--noise", "4"],
                          cwd=evm_support.REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "database SQLite" in out
    assert "ETH 2 through order_place + 18 copied rows" in out
    assert "orders paid after step 5: 4 of 4" in out
    # one row per step and asset, with its figures
    for step in ("1 first poll", "2 new empty block", "3 2/asset paid", "4 new block", "5 +12 blocks"):
        for asset in ("ETH", "USDC"):
            assert re.search(rf"^{re.escape(step)}.*\s{asset}\s+\S+\s+20\s", out, re.M), (step, asset, out)
    paid = re.search(r"^3 2/asset paid in 3 blocks\s+USDC\s+\S+\s+20\s+(\d+)\s+(\d+)\s", out, re.M)
    assert paid and paid.groups() == ("2", "2"), out  # found and recorded
    assert re.search(r"^target: one asset's poll with 20 open orders under 5 s: (met|MISSED)", out, re.M)
    assert "both assets in one cycle" in out and "HTTP round trips" in out
    assert "PROBLEM" not in out


def test_the_chain_watch_bench_runs_on_three_networks_at_once(anvil_binary):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "ANCHORGPU_DATABASE_URL"} and not k.startswith("ANCHORGPU_WATCH_")}
    env["ANCHORGPU_ANVIL"] = anvil_binary
    done = subprocess.run([sys.executable, str(BENCH), "--networks", "3", "--orders", "20", "--history", "5",
                           "--noise", "4"], cwd=evm_support.REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "3 networks at once: Ethereum (chain id 1)" in out and "Base (chain id 8453)" in out
    assert "Polygon (chain id 137)" in out and "database SQLite" in out
    assert "each poll's filters cover 60 addresses" in out
    assert "orders paid after step 5: 6 of 6; transfers on the wrong network recorded: 6 (expected 6)" in out
    for network in ("ethereum", "base", "polygon"):
        paid = re.search(rf"^3 2/network paid, 2 strays\s+{network}\s+\S+\s+20\s+(\d+)\s+(\d+)\s+(\d+)\s", out, re.M)
        assert paid and paid.groups() == ("4", "2", "2"), (network, out)  # found, recorded, strays
        for step in ("1 first poll", "2 new empty block", "4 new block", "5 +12 blocks"):
            assert re.search(rf"^{re.escape(step)}.*\s{network}\s+\S+\s+20\s", out, re.M), (step, network, out)
    assert re.search(r"^target: one network's poll with 20 open orders under 5 s: (met|MISSED)", out, re.M)
    assert "the sweep of 3 networks" in out and "PROBLEM" not in out
