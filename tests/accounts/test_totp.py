"""The TOTP module against the RFCs' own test vectors: RFC 4226 Appendix D (HOTP) and RFC 6238
Appendix B (TOTP, SHA-1, 8 digits; the 6-digit codes are their last six digits); the +-1 step window,
replay refusal, the otpauth URI and the recovery codes. No database, no Django."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from anchorgpu.accounts import totp

RFC_KEY = b"12345678901234567890"  # the ASCII seed both RFCs use for SHA-1

# RFC 4226 Appendix D: HOTP values for counters 0..9.
HOTP_VECTORS = ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"]

# RFC 6238 Appendix B, SHA-1 rows: Unix time, time step (hex), 8-digit TOTP.
TOTP_VECTORS = [
    (59, 0x1, "94287082"),
    (1111111109, 0x23523EC, "07081804"),
    (1111111111, 0x23523ED, "14050471"),
    (1234567890, 0x273EF07, "89005924"),
    (2000000000, 0x3F940AA, "69279037"),
    (20000000000, 0x27BC86AA, "65353130"),
]


@pytest.mark.parametrize("counter", range(10))
def test_hotp_matches_rfc_4226(counter):
    assert totp.hotp(RFC_KEY, counter) == HOTP_VECTORS[counter]


@pytest.mark.parametrize(("unix_time", "step", "code"), TOTP_VECTORS)
def test_totp_matches_rfc_6238_with_8_digits_and_truncates_to_6(unix_time, step, code):
    assert totp.time_step(unix_time) == step
    assert totp.totp(RFC_KEY, unix_time, digits=8) == code
    assert totp.totp(RFC_KEY, unix_time) == code[-6:]  # 6 digits: the same number modulo 10**6


def test_the_base32_secret_round_trips_and_bad_ones_are_refused():
    secret = totp.new_secret()
    assert len(secret) == 32 and "=" not in secret  # 20 bytes, unpadded
    assert len(totp.secret_bytes(secret)) == 20
    assert totp.secret_bytes("gezd gnbv-GY3T qojq gezd gnbv gy3t qojq") == RFC_KEY  # spaces, dashes, lower case
    assert totp.new_secret() != secret
    for bad in ("", "not base32!", "ABC1"):
        with pytest.raises(ValueError):
            totp.secret_bytes(bad)


def test_codes_are_accepted_one_step_either_side_and_no_further():
    now = 1_111_111_111  # step 0x23523ED
    step = totp.time_step(now)
    for offset in (-1, 0, 1):
        code = totp.hotp(RFC_KEY, step + offset)
        assert totp.matching_step(RFC_KEY, code, now, last_used_step=None) == step + offset
    for offset in (-2, 2):
        assert totp.matching_step(RFC_KEY, totp.hotp(RFC_KEY, step + offset), now, last_used_step=None) is None
    assert totp.matching_step(RFC_KEY, "000000" if totp.hotp(RFC_KEY, step) != "000000" else "111111", now,
                              last_used_step=None) is None


def test_a_used_code_and_any_earlier_one_are_refused():
    now = 1_234_567_890
    step = totp.time_step(now)
    code = totp.totp(RFC_KEY, now)
    assert totp.matching_step(RFC_KEY, code, now, last_used_step=step - 1) == step
    assert totp.matching_step(RFC_KEY, code, now, last_used_step=step) is None  # the replay
    earlier = totp.hotp(RFC_KEY, step - 1)  # still inside the window, but older than the code used
    assert totp.matching_step(RFC_KEY, earlier, now, last_used_step=step) is None
    assert totp.matching_step(RFC_KEY, totp.hotp(RFC_KEY, step + 1), now, last_used_step=step) == step + 1


def test_typed_codes_are_cleaned_and_malformed_ones_refused():
    now = 59
    code = totp.totp(RFC_KEY, now)
    assert totp.matching_step(RFC_KEY, f" {code[:3]} {code[3:]} ", now, last_used_step=None) == 1
    assert totp.clean_code("１２３４５６") is None  # full-width digits are not ASCII digits
    for bad in ("", "12345", "1234567", "12a456", None):
        assert totp.clean_code(bad) is None
        assert totp.matching_step(RFC_KEY, bad, now, last_used_step=None) is None


def test_the_provisioning_uri_names_issuer_account_and_parameters():
    uri = totp.provisioning_uri(secret="JBSWY3DPEHPK3PXP", account="ops@anchorgpu.example", issuer="AnchorGPU")
    parts = urlsplit(uri)
    assert (parts.scheme, parts.netloc, parts.path) == ("otpauth", "totp", "/AnchorGPU:ops@anchorgpu.example")
    assert parse_qs(parts.query) == {"secret": ["JBSWY3DPEHPK3PXP"], "issuer": ["AnchorGPU"], "algorithm": ["SHA1"],
                                     "digits": ["6"], "period": ["30"]}
    assert "%20" in totp.provisioning_uri(secret="A", account="first last", issuer="AnchorGPU")
    assert totp.grouped("ABCDEFGHIJ") == "ABCD EFGH IJ"


def test_recovery_codes_are_distinct_cleaned_and_hashed_with_the_salt():
    codes = totp.new_recovery_codes()
    assert len(codes) == len(set(codes)) == totp.RECOVERY_COUNT
    assert all(len(code) == 14 and code.count("-") == 2 for code in codes)
    cleaned = totp.clean_recovery_code(codes[0].upper().replace("-", " "))
    assert cleaned == codes[0].replace("-", "")
    assert totp.clean_recovery_code("abcd-efgh-jkm0") is None  # 0 is not in the alphabet
    assert totp.clean_recovery_code("abcd-efgh") is None
    first = totp.recovery_code_hash(cleaned, "salt-a")
    assert len(first) == 64 and first == totp.recovery_code_hash(cleaned, "salt-a")
    assert first != totp.recovery_code_hash(cleaned, "salt-b")
