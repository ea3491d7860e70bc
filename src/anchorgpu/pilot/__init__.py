"""The pilot kit: a short, real fine-tuning run that proves a configuration before a term is booked.

``anchorgpu pilot run`` trains the customer's model on the longest batches of
their data for a few steps and records what matters (step time and its
spread, data-loading wait, peak memory, validation and checkpoint time, exact
versions), then restores the checkpoint in a fresh process and checks that
the next step comes out the same. ``anchorgpu pilot scale`` repeats it under
DDP and FSDP on more processes at the same global batch.

Needs the ``ml`` extra (torch, transformers, peft); no Django, nothing from a
hub. ``options`` is pure Python; everything else imports torch.
"""
