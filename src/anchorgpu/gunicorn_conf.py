"""gunicorn's configuration for the shop: metrics counted over every worker process.

    gunicorn -c python:anchorgpu.gunicorn_conf anchorgpu.wsgi -k gthread -w CORES --threads 8 -b 127.0.0.1:8000

Every other setting stays on the command line. This file only does prometheus-client's multiprocess
bookkeeping (``anchorgpu.ops.metrics_dir``):

* when gunicorn reads it (in the master, before any worker starts and before a preloaded app is imported), it
  puts ``PROMETHEUS_MULTIPROC_DIR`` into the environment the workers inherit: the folder the operator set, or
  a new private temporary folder;
* ``on_starting`` (once per master, not on a reload) empties the folder of a previous run's files;
* ``child_exit`` tells prometheus-client that a worker is gone, so its in-flight gauge stops counting (its
  counters and histograms stay: what it answered was answered);
* ``on_exit`` removes the temporary folder if this file created it.

gunicorn reads the module's public names as settings, so everything else here starts with an underscore.
"""

from __future__ import annotations

import shutil as _shutil

from anchorgpu.ops import metrics_dir as _metrics_dir

_DIR, _CREATED = _metrics_dir.ensure()


def on_starting(server):
    removed = _metrics_dir.empty(_DIR)
    server.log.info("Metrics of all workers in %s (%d stale files removed)", _DIR, removed)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, _DIR)


def on_exit(server):
    if _CREATED:
        _shutil.rmtree(_DIR, ignore_errors=True)
