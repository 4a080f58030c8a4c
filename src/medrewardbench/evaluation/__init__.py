"""The eval job: plan the requests, dispatch them to a judge, keep every judgment in the results store.

* :mod:`~medrewardbench.evaluation.job`: ``evaluate``, the whole ``eval`` command as a function
  (data, judges, store, metrics, the files it writes);
* :mod:`~medrewardbench.evaluation.runner`: planning one request per case and order, skipping what
  the store holds, dispatching batches, mapping verdicts back to source order;
* :mod:`~medrewardbench.evaluation.store`: the SQLite results store (runs and judgments), which
  metrics and reports read back.

This ``__init__`` imports nothing: metrics read the store without pulling in the job above them.
"""
