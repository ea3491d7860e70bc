// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title TestToken: a bare ERC-20 for AnchorGPU's chain-watcher tests.
/// @notice Test chains only. The account that deployed it may mint; nobody else can.
///         Balances use Solidity 0.8's checked arithmetic, so an overdraft reverts.
contract TestToken {
    string public name;
    string public symbol;
    uint8 public decimals;
    uint256 public totalSupply;
    address public immutable minter;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
        minter = msg.sender;
    }

    /// @notice Creates `amount` new units for `to`; only the deployer may call it.
    function mint(address to, uint256 amount) external {
        require(msg.sender == minter, "TestToken: only the deployer mints");
        require(to != address(0), "TestToken: mint to the zero address");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= value, "TestToken: allowance too small");
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "TestToken: transfer to the zero address");
        uint256 held = balanceOf[from];
        require(held >= value, "TestToken: balance too small");
        balanceOf[from] = held - value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
