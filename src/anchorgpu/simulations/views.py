"""The planner's simulation as a background job: queue it, watch it, price the options from what it measured.

``planner_simulate`` (POST, from the planner page's results) checks the same
form, queues the job (or finds an identical one) and sends the visitor to
the job's page. That page polls a fragment every few seconds until the job
is done, then shows the simulated breakdown beside the analytic one and
every option priced from the simulated steps, each linked to checkout.
"""

from __future__ import annotations

from django import forms
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from anchorgpu.i18n import message
from anchorgpu.ops.ratelimit import client_address
from anchorgpu.planner.analytic import Reserve, estimate
from anchorgpu.planner.errors import PlannerInputError
from anchorgpu.planner.measured import MeasuredSteps, not_simulable
from anchorgpu.planner.recommend import GB, card_counts
from anchorgpu.planner.setup import setup_from_mapping
from anchorgpu.planner.shop_offers import shop_offers
from anchorgpu.planner_pages.form import PlannerForm
from anchorgpu.planner_pages.views import COMPONENT_LABELS, model_source, results_context, spec_from_source
from anchorgpu.simulations.availability import simulation_unavailable
from anchorgpu.simulations.models import SimulationJob
from anchorgpu.simulations.services import SimulationRefused, job_submit, queue_position, requester_digest

POLL_SECONDS = 2


class ViewForm(forms.Form):
    """How to show a job's result: the headroom and the term (not part of what is simulated)."""

    headroom = PlannerForm.base_fields["headroom"]
    term = PlannerForm.base_fields["term"]


def _requester(request) -> str:
    if request.user.is_authenticated:
        return requester_digest("user", request.user.pk)
    return requester_digest("address", client_address(request))  # each visitor's own, behind a proxy too


def _planner_again(request, form, problem: str, status: int):
    form.add_error(None, problem)
    return render(request, "planner_pages/planner.html", {"form": form}, status=status)


@require_POST
def planner_simulate(request):
    form = PlannerForm(request.GET)
    if not form.is_valid():
        return render(request, "planner_pages/planner.html", {"form": form}, status=400)
    data = form.cleaned_data
    try:
        spec = spec_from_source(model_source(data))
        setup = setup_from_mapping(form.setup_fields()).validate(spec)
    except PlannerInputError as exc:
        return _planner_again(request, form, _("The planner cannot use this input: %(problem)s")
                              % {"problem": message(exc)}, 400)
    refusal = not_simulable(setup)
    if refusal or (refusal := simulation_unavailable()):
        return _planner_again(request, form, _(refusal), 400)
    counts = sorted(set(card_counts(shop_offers())) | {setup.gpus})
    try:
        job, _created = job_submit(model_source=model_source(data), model_label=spec.label,
                                   setup=form.setup_fields(), card_counts=counts, requester=_requester(request))
    except SimulationRefused as exc:
        return _planner_again(request, form, message(exc), 429)
    return redirect(reverse("planner_simulation", kwargs={"job_id": job.pk})
                    + f"?headroom={data['headroom']}&term={data['term']}")


def _job_context(request, job: SimulationJob) -> dict:
    view = ViewForm(request.GET)
    headroom, term = (view.cleaned_data["headroom"], view.cleaned_data["term"]) if view.is_valid() else (10, 7)
    context = {"job": job, "headroom": headroom, "term": term, "poll_seconds": POLL_SECONDS,
               "view_query": f"headroom={headroom}&term={term}"}
    if job.state == SimulationJob.State.QUEUED:
        context["ahead"] = queue_position(job)
    if job.state != SimulationJob.State.DONE:
        return context
    try:
        spec = spec_from_source(job.model_source)
        setup = setup_from_mapping(job.setup).validate(spec)
        steps = MeasuredSteps.from_json(job.result)
        context.update(results_context(spec, setup, headroom=headroom / 100, term=term, estimate_with=steps))
    except PlannerInputError as exc:  # a job stored by an older version that no longer reads back
        context["stale_error"] = message(exc)
        return context
    simulated, analytic = context["breakdown_object"], estimate(spec, setup, Reserve())
    context["comparison"] = [(COMPONENT_LABELS[name], simulated_value / GB, analytic.components()[name] / GB)
                             for name, simulated_value in simulated.components().items()]
    context["analytic_peak_gb"] = analytic.peak / GB
    context["difference_percent"] = 100 * (analytic.peak - simulated.peak) / simulated.peak if simulated.peak else 0.0
    context["engine"] = "simulate"
    return context


@require_GET
def planner_simulation(request, job_id):
    job = get_object_or_404(SimulationJob, pk=job_id)
    return render(request, "simulations/planner_simulation.html", _job_context(request, job))


@require_GET
def planner_simulation_status(request, job_id):
    """The live part of the job page, for polling."""
    job = get_object_or_404(SimulationJob, pk=job_id)
    return render(request, "simulations/_simulation_live.html", _job_context(request, job))
