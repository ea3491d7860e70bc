"""Helpers for tests that need an EVM chain: an anvil node, and a test ERC-20 on it.

Two kinds of chain serve the tests (their fixtures live in ``tests/chains/conftest.py``):

* anvil, a real JSON-RPC node started once per session from the npm package that
  ``make anvil`` installs into ``.tools/``. It has snapshots (``evm_snapshot`` /
  ``evm_revert``), which is how reorgs are simulated, and real "safe"/"finalized" tags.
* eth-tester (``EthereumTesterProvider``), an in-process chain, fresh for every test.

Both mine each transaction as it is sent and both have unlocked, funded dev accounts
(``w3.eth.accounts``), so the helpers below send from those by address.

web3 8 reminders: ``HexBytes.hex()`` has no ``0x`` (use ``.to_0x_hex()``); on eth-tester,
``w3.eth.get_logs`` with HexBytes topics returns nothing, so pass topics as hex strings
(``TRANSFER_TOPIC``, ``address_topic``).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from eth_tester.exceptions import TransactionFailed
from web3 import Web3
from web3.exceptions import ContractLogicError
from web3.providers.eth_tester import EthereumTesterProvider

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = Path(__file__).resolve().parent / "contracts"
TOKEN_SOURCE = CONTRACTS / "TestToken.sol"
TOKEN_ARTIFACT = CONTRACTS / "TestToken.json"

ANVIL_ENV = "ANCHORGPU_ANVIL"
ANVIL_NPM_BINARY = REPO_ROOT / ".tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
ANVIL_NPM_LINK = REPO_ROOT / ".tools/node_modules/.bin/anvil"  # whichever platform package was installed
ANVIL_INSTALL_HINT = (
    "make anvil  (runs: npm install --prefix .tools --save-exact --no-audit --no-fund "
    "@foundry-rs/anvil-linux-amd64@1.7.1), or set ANCHORGPU_ANVIL to an anvil binary"
)
ANVIL_CHAIN_ID = 31337
ANVIL_START_TIMEOUT = 15.0

# What a reverting call or transaction raises: ContractLogicError on anvil, but eth-tester's own
# TransactionFailed on the in-process chain (web3 8 does not translate it).
REVERTED = (ContractLogicError, TransactionFailed)

# keccak256("Transfer(address,address,uint256)"), the first topic of every ERC-20 Transfer log.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


# --- anvil -------------------------------------------------------------------------------------


class AnvilMissing(Exception):
    """No anvil binary was found (the message says where it looked and how to install it)."""


def find_anvil() -> str:
    """The anvil binary to run: $ANCHORGPU_ANVIL, else the copy in .tools/, else ``anvil`` on PATH."""
    configured = os.environ.get(ANVIL_ENV, "").strip()
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        # An explicit setting that points nowhere is a mistake to report, not a reason to look elsewhere.
        raise AnvilMissing(f"{ANVIL_ENV}={configured!r} is not an executable file; unset it, or install anvil "
                           f"with: {ANVIL_INSTALL_HINT}")
    for candidate in (ANVIL_NPM_BINARY, ANVIL_NPM_LINK):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which("anvil")
    if on_path:
        return on_path
    raise AnvilMissing(f"anvil not found ({ANVIL_ENV} unset, nothing at {ANVIL_NPM_BINARY}, none on PATH); "
                       f"install it with: {ANVIL_INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rpc(url: str, method: str, params: list | None = None, *, timeout: float = 5.0):
    """One raw JSON-RPC call without web3 (used to probe a node that may not be up yet)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.loads(response.read())
    if "error" in answer:
        raise RuntimeError(f"{method} failed: {answer['error']}")
    return answer["result"]


class AnvilNode:
    """An anvil process on 127.0.0.1 and a free port; ``start()`` returns once it answers.

    Automine is left on (no ``--block-time``): each transaction is mined in its own block
    as soon as it arrives.
    """

    def __init__(self, binary: str, *, chain_id: int = ANVIL_CHAIN_ID, extra_args: tuple[str, ...] = ()):
        self.binary = binary
        self.chain_id = chain_id
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.startup_seconds = 0.0
        self._log = None

    def start(self, timeout: float = ANVIL_START_TIMEOUT) -> str:
        # A port picked free can be taken before anvil binds it; a fresh one is tried if so.
        last_problem = ""
        for _attempt in range(3):
            problem = self._start_once(_free_port(), timeout)
            if problem is None:
                return self.url
            last_problem = problem
        raise RuntimeError(f"anvil did not start: {last_problem}")

    def _start_once(self, port: int, timeout: float) -> str | None:
        self._log = tempfile.TemporaryFile()
        command = [self.binary, "--host", "127.0.0.1", "--port", str(port), "--chain-id", str(self.chain_id),
                   "--silent", *self.extra_args]
        began = time.monotonic()
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self._output()
                self._close_log()
                return f"exited with status {self.process.returncode}: {output or '(no output)'}"
            try:
                answered = int(rpc(url, "eth_chainId", timeout=1.0), 16)
            except (OSError, urllib.error.URLError, ValueError, RuntimeError):
                time.sleep(0.05)
                continue
            if answered != self.chain_id:
                self.stop()
                raise RuntimeError(f"the node at {url} reports chain id {answered}, not {self.chain_id}")
            self.url = url
            self.startup_seconds = time.monotonic() - began
            return None
        output = self._output()
        self.stop()
        return f"no answer to eth_chainId at {url} within {timeout:.0f} s; output: {output or '(none)'}"

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-2000:]

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None
        self._close_log()

    def __enter__(self) -> AnvilNode:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def anvil_web3(url: str) -> Web3:
    return Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10}))


# --- chain control -----------------------------------------------------------------------------


def is_eth_tester(w3: Web3) -> bool:
    return isinstance(w3.provider, EthereumTesterProvider)


def _call(w3: Web3, method: str, params: list):
    return w3.manager.request_blocking(method, params)


def mine(w3: Web3, n: int = 1) -> None:
    """Mine ``n`` empty blocks."""
    if n <= 0:
        return
    if is_eth_tester(w3):
        w3.provider.ethereum_tester.mine_blocks(n)
    else:
        _call(w3, "anvil_mine", [hex(n)])


def snapshot(w3: Web3) -> str:
    """anvil: remember the chain as it is now; ``revert`` returns to it, forgetting later blocks."""
    if is_eth_tester(w3):
        raise NotImplementedError("use anvil for snapshots and reorgs (eth-tester treats safe/finalized as latest)")
    return _call(w3, "evm_snapshot", [])


def revert(w3: Web3, snap: str) -> None:
    """anvil: go back to ``snap``. Blocks mined since are gone (as after a reorg); so is the snapshot."""
    if is_eth_tester(w3):
        raise NotImplementedError("use anvil for snapshots and reorgs")
    if not _call(w3, "evm_revert", [snap]):
        raise RuntimeError(f"evm_revert refused snapshot {snap!r}")


# --- the test token ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _artifact() -> dict:
    return json.loads(TOKEN_ARTIFACT.read_text())


def load_token_artifact() -> dict:
    """The compiled TestToken: ``contractName``, ``compiler``, ``sourceSha256``, ``abi``, ``bytecode``."""
    return copy.deepcopy(_artifact())


def token_contract(w3: Web3, token: str):
    return w3.eth.contract(address=Web3.to_checksum_address(token), abi=_artifact()["abi"])


def wait(w3: Web3, tx_hash: str):
    """The receipt of a transaction both test chains have already mined; a reverted one raises."""
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=10)
    if receipt["status"] != 1:
        raise AssertionError(f"transaction {tx_hash} reverted")
    return receipt


def deploy_token(w3: Web3, *, decimals: int = 6, name: str = "Test Dollar", symbol: str = "TUSD",
                 deployer: str | None = None) -> str:
    """Deploys a TestToken and returns its checksum address; ``deployer`` (default: the first dev
    account) is the only account that may mint."""
    artifact = _artifact()
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    sender = deployer or w3.eth.accounts[0]
    tx_hash = factory.constructor(name, symbol, decimals).transact({"from": sender})
    address = wait(w3, tx_hash)["contractAddress"]
    return Web3.to_checksum_address(address)


def mint(w3: Web3, token: str, to: str, amount: int) -> str:
    """Mints ``amount`` base units to ``to`` (sent by the token's deployer); returns the tx hash."""
    contract = token_contract(w3, token)
    minter = contract.functions.minter().call()
    tx_hash = contract.functions.mint(Web3.to_checksum_address(to), amount).transact({"from": minter})
    wait(w3, tx_hash)
    return tx_hash.to_0x_hex()


def token_transfer(w3: Web3, token: str, sender: str, to: str, amount: int) -> str:
    """``sender`` (an unlocked dev account) sends ``amount`` base units to ``to``; returns the tx hash, 0x-hex."""
    contract = token_contract(w3, token)
    tx_hash = contract.functions.transfer(Web3.to_checksum_address(to), amount).transact(
        {"from": Web3.to_checksum_address(sender)})
    wait(w3, tx_hash)
    return tx_hash.to_0x_hex()


def token_balance(w3: Web3, token: str, owner: str) -> int:
    return token_contract(w3, token).functions.balanceOf(Web3.to_checksum_address(owner)).call()


def send_eth(w3: Web3, sender: str, to: str, wei: int) -> str:
    """A plain value transfer between accounts; returns the tx hash, 0x-hex."""
    tx_hash = w3.eth.send_transaction({"from": Web3.to_checksum_address(sender),
                                       "to": Web3.to_checksum_address(to), "value": wei})
    wait(w3, tx_hash)
    return tx_hash.to_0x_hex()


def address_topic(address: str) -> str:
    """An address as an indexed-event topic: 32 bytes, left-padded with zeros, 0x-hex string."""
    return "0x" + "00" * 12 + Web3.to_checksum_address(address)[2:].lower()


def topic_address(topic) -> str:
    """The checksum address inside an indexed address topic (HexBytes or hex string)."""
    raw = topic.to_0x_hex() if hasattr(topic, "to_0x_hex") else str(topic)
    return Web3.to_checksum_address("0x" + raw[-40:])
