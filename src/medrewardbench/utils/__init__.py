"""Plumbing shared by every part, none of it about judges or statistics.

* :mod:`~medrewardbench.utils.sqlitedb`: opening SQLite files (WAL, busy timeout, named migrations, transactions);
* :mod:`~medrewardbench.utils.batching`: batches of a lazy stream; the one guarded batch call (eval, sweep, build);
* :mod:`~medrewardbench.utils.outdir`: output directory checks and the lock;
* :mod:`~medrewardbench.utils.secrets`: the one API-key scrubber;
* :mod:`~medrewardbench.utils.safe_text`: control characters escaped before anything reaches a terminal;
* :mod:`~medrewardbench.utils.background_server`: the one in-process HTTP server (uvicorn in a thread).
* :mod:`~medrewardbench.utils.gcpolicy`: fewer, cheaper garbage collections during a long run and at exit.
"""
