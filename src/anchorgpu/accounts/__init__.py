"""Customers' and operators' accounts: sign-up and log-in (with the e-mailed code of a new device), password
change and reset, two-factor sign-in for operators, API tokens and saved SSH keys; their models, pages and
templates."""
