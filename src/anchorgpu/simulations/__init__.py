"""Planner simulations as background jobs: the shop queues them, a runner thread in ``anchorgpu worker``
(and in ``anchorgpu serve``) runs each in a child process with a time limit, the planner page polls."""
