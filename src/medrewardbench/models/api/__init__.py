"""Models behind an OpenAI-compatible Chat Completions API: the client every ``api:`` judge and generator uses.

* :mod:`~medrewardbench.models.api.chat`: :class:`ChatClient` (settings, key, concurrency,
  retries, structured-output fallback) and :class:`CallOutcome`, how one call ended;
* :mod:`~medrewardbench.models.api.exchange`: one request's path (prepare, send, time) and the
  model part of a fingerprint;
* :mod:`~medrewardbench.models.api.retry`: which failures are retried and how long to wait;
* :mod:`~medrewardbench.models.api.images`: images as data URLs, sent as they are where possible.

The ``openai`` package (the ``api`` extra) is imported when a client is made.
"""
