// Compiles one Solidity file with solc-js and writes a small artifact (ABI and creation bytecode).
// Called by build.sh, which sets NODE_PATH to the folder holding the pinned solc package.
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const [sourcePath, outPath] = process.argv.slice(2);
const fileName = path.basename(sourcePath);
const contractName = path.basename(sourcePath, ".sol");
const source = fs.readFileSync(sourcePath, "utf8");
const optimizer = { enabled: true, runs: 200 };
const evmVersion = "paris"; // no PUSH0: runs on eth-tester, anvil and any older test chain

const input = {
  language: "Solidity",
  sources: { [fileName]: { content: source } },
  settings: {
    optimizer,
    evmVersion,
    outputSelection: { [fileName]: { [contractName]: ["abi", "evm.bytecode.object"] } },
  },
};

const output = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const message of output.errors || []) {
  process.stderr.write(message.formattedMessage || message.message);
  if (message.severity === "error") failed = true;
}
if (failed) process.exit(1);

const compiled = output.contracts[fileName][contractName];
const artifact = {
  contractName,
  compiler: { name: "solc-js", version: solc.version(), evmVersion, optimizer },
  sourceSha256: crypto.createHash("sha256").update(source, "utf8").digest("hex"),
  abi: compiled.abi,
  bytecode: "0x" + compiled.evm.bytecode.object,
};
fs.writeFileSync(outPath, JSON.stringify(artifact, null, 2) + "\n");
console.log(`Wrote ${outPath} (${compiled.evm.bytecode.object.length / 2} bytes of creation code)`);
