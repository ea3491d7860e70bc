"""A planner simulation queued from the shop: what to simulate, where it stands, what it measured."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class SimulationJob(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", pgettext_lazy("simulation state", "Queued")
        RUNNING = "running", pgettext_lazy("simulation state", "Running")
        DONE = "done", pgettext_lazy("simulation state", "Done")
        FAILED = "failed", pgettext_lazy("simulation state", "Failed")

    class Failure(models.TextChoices):
        INPUT = "input", _("The planner cannot simulate this input")
        TIMEOUT = "timeout", _("The simulation ran past its time limit")
        CRASHED = "crashed", _("The simulation stopped without an answer")
        UNAVAILABLE = "unavailable", _("The simulation engine is not installed on this server")

    UNFINISHED = (State.QUEUED, State.RUNNING)

    # The public handle: the job page's address. Unguessable, so a link can be shared.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # What the job computes, as a digest: identical requests share one job and its result.
    key = models.CharField(max_length=64, db_index=True)
    model_label = models.CharField(max_length=200)
    # The model as given: {"preset": name} or {"config": {...}} (a Hugging Face config.json).
    model_source = models.JSONField()
    setup = models.JSONField()  # the training setup's fields (planner.setup.setup_from_mapping)
    card_counts = models.JSONField()  # every card count the shop's options have when the job was queued
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    progress = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    requester = models.CharField(max_length=64, blank=True, db_index=True)  # a digest of the session or user
    runner = models.CharField(max_length=100, blank=True)  # host:pid of the runner that took it
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)  # planner.measured.MeasuredSteps.to_json()
    seconds = models.FloatField(null=True, blank=True)  # wall time of the child process
    failure = models.CharField(max_length=12, choices=Failure.choices, blank=True)
    error = models.TextField(blank=True)  # for the customer: what was wrong (no traceback)

    class Meta:
        ordering = ["created_at"]
        verbose_name = _("simulation job")
        verbose_name_plural = _("simulation jobs")
        constraints = [
            models.CheckConstraint(condition=~models.Q(state="done") | models.Q(result__isnull=False),
                                   name="simulation_done_has_result"),
        ]

    def __str__(self) -> str:
        return f"{self.model_label} ({self.get_state_display()})"

    @property
    def finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)
