import pytest

from anchorgpu.payments.txids import TxIdError, normalise_txid

BTC = "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b"
EVM = "0x" + "ab" * 32


def test_valid_ids_are_normalised():
    assert normalise_txid("  " + BTC.upper() + "\n", chain="btc") == BTC
    assert normalise_txid(EVM.upper().replace("0X", "0x"), chain="evm") == EVM


@pytest.mark.parametrize("text, chain, words", [
    ("0x" + BTC, "btc", "no “0x”"), (BTC[:-1], "btc", "64"), (BTC[:-1] + "g", "btc", "64"), ("", "btc", "64"),
    (BTC, "evm", "0x"), ("0x" + "ab" * 31, "evm", "64"), ("0x" + "0" * 64, "evm", "zeros"),
    (EVM, "solana", "Unknown chain"), ("0x" + "ab" * 32 + "\u200b", "evm", "0x"),
])
def test_wrong_formats_are_refused_with_a_reason(text, chain, words):
    with pytest.raises(TxIdError) as caught:
        normalise_txid(text, chain=chain)
    assert words in str(caught.value)
