"""How a settled transfer's place on chain is judged from a node's answers (no database, no node)."""

from __future__ import annotations

from anchorgpu.chains.base import BlockRef
from anchorgpu.payments.settled_check import Verdict, judge

CREDITED = BlockRef(100, "0x" + "aa" * 32)
OTHER = "0x" + "bb" * 32


def verdict(now_at, canonical, tip=120):
    return judge(block_number=CREDITED.number, block_hash=CREDITED.hash, now_at=now_at, canonical=canonical, tip=tip)


def test_in_its_block_on_the_chain_it_is_found():
    assert verdict(CREDITED, {100: CREDITED.hash}) is Verdict.FOUND


def test_in_no_block_and_its_block_replaced_it_is_gone():
    assert verdict(None, {100: OTHER}) is Verdict.GONE


def test_a_missing_receipt_alone_is_not_proof():
    assert verdict(None, {100: CREDITED.hash}) is Verdict.UNSURE


def test_a_node_whose_chain_does_not_reach_the_block_is_behind_not_proof():
    assert verdict(None, {100: None}, tip=99) is Verdict.UNSURE
    assert verdict(None, {}, tip=120) is Verdict.UNSURE


def test_mined_again_in_another_block_of_the_chain_it_moved():
    elsewhere = BlockRef(104, "0x" + "cc" * 32)
    assert verdict(elsewhere, {100: OTHER, 104: elsewhere.hash}) is Verdict.MOVED


def test_a_receipt_naming_a_block_the_chain_does_not_have_is_not_believed():
    stale = BlockRef(104, "0x" + "cc" * 32)
    assert verdict(stale, {100: OTHER, 104: "0x" + "dd" * 32}) is Verdict.UNSURE
    assert verdict(BlockRef(130, "0x" + "cc" * 32), {100: OTHER}, tip=120) is Verdict.UNSURE
