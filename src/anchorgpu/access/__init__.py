"""The real provisioner: containers per order on the operator's hosts, over SSH (DESIGN §6)."""
