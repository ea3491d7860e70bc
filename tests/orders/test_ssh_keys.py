"""SSH public keys: real parsing, private keys refused as leaked, fingerprints as ssh-keygen prints them."""

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from anchorgpu.orders.ssh_keys import MAX_KEYS, SSHKeyError, parse_key, parse_keys

# Made with ssh-keygen; the fingerprints are what `ssh-keygen -lf` printed for them.
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICFJpgQkD8RAMwXxeid3Hdjumi/pZxatW2SdWfSI1/uE ana@laptop"
ED25519_FP = "SHA256:V+8MBV5Ia0t0+o1SGW4lWudoa+EYXf9/MZm1ifw6unA"
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBCCTZzBdHLHBvi9HJAGhszZZqJGpAqYg8"
         "Ugfy8kpZEn9BSvc/tAwxR7zpcONicv7RTdyJMjz3MTE+hqDaN/Uhd8= root@vm")
ECDSA_FP = "SHA256:5Fdq5GigQmZ+ZoCgATiz6Eu6pBKBAp0Fgweb0bW4mgw"


def _openssh_public(key) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _openssh_private(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode()


def test_known_keys_have_ssh_keygen_fingerprints():
    ed = parse_key(ED25519)
    assert (ed.type, ed.bits, ed.fingerprint, ed.comment) == ("ssh-ed25519", 256, ED25519_FP, "ana@laptop")
    ec = parse_key(ECDSA)
    assert (ec.type, ec.bits, ec.fingerprint) == ("ecdsa-sha2-nistp256", 256, ECDSA_FP)
    assert ed.label == f"ssh-ed25519 256 {ED25519_FP} ana@laptop"


def test_rsa_needs_2048_bits():
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(SSHKeyError, match="1024 bits"):
        parse_key(_openssh_public(small))
    big = parse_key(_openssh_public(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    assert (big.type, big.bits) == ("ssh-rsa", 2048)


@pytest.mark.parametrize("make", [
    lambda: _openssh_private(ed25519.Ed25519PrivateKey.generate()),
    lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()).decode(),
    lambda: "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n",
])
def test_a_private_key_is_refused_as_leaked(make):
    text = make()
    for parse in (parse_key, parse_keys):
        with pytest.raises(SSHKeyError) as caught:
            parse(text)
        assert caught.value.leaked
        assert "consider it leaked" in str(caught.value)


@pytest.mark.parametrize("text, words", [
    ("", "at least one"),
    ("# only a comment\n\n", "at least one"),
    ("ssh-ed25519", "looks like"),
    ("ssh-ed25519 not*base64 me", "does not decode"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICFJpgQkD8RAMwXxeid3Hdjumi/pZxatW2SdWfSI1/u", "does not decode"),
    ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "not"),
    ("ssh-rsa " + "A" * 20000, "too long"),
    (ED25519.replace("ana@laptop", "ana\x00laptop"), "printable"),
    (ED25519 + "\n" + ED25519, "repeats a key"),
    ("\n".join(_openssh_public(ed25519.Ed25519PrivateKey.generate()) for _ in range(MAX_KEYS + 1)), "At most"),
])
def test_malformed_input_is_refused_with_a_reason(text, words):
    with pytest.raises(SSHKeyError) as caught:
        parse_keys(text)
    assert words in str(caught.value)
    assert not caught.value.leaked


def test_several_keys_one_per_line_with_comments_and_blank_lines():
    keys = parse_keys(f"# laptop\n{ED25519}\n\n  {ECDSA}  \n")
    assert [k.fingerprint for k in keys] == [ED25519_FP, ECDSA_FP]
    assert keys[1].line == ECDSA  # normalised: no surrounding spaces
