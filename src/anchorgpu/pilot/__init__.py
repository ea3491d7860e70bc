"""The pilot kit: a short, real fine-tuning run that proves a configuration before a term is booked.

``anchorgpu pilot run`` trains the customer's model on the longest batches of
their data for a few steps and records what matters (step time and its
spread, data-loading wait, peak memory, validation and checkpoint time, exact
versions), then restores the checkpoint in a fresh process and checks that
the next step comes out the same. ``anchorgpu pilot scale`` repeats it under
DDP and FSDP on more processes at the same global batch.

``anchorgpu pilot check`` comes first on a rented machine: it records the
accelerators and the software stack, judges them against the product booked,
and runs the essential operations briefly.

Needs the ``ml`` extra (torch, transformers, peft); no Django, nothing from a
hub. ``options`` and the stack check's record, rules, topology parsers and
report (``stack``, ``stack_rules``, ``topology``, ``check_report``, ``check``)
are pure Python; everything else imports torch.
"""
