"""inspect_ai: the ``medrewardbench/pairwise`` task, and its eval logs imported as runs.

* :mod:`~medrewardbench.integrations.inspect.task`: the task (``inspect eval medrewardbench/pairwise
  --model ...``), found by inspect through the ``inspect_ai`` entry point of this package
  (:mod:`~medrewardbench.integrations.inspect._registry`). One sample per case and order, the
  prompt of :mod:`medrewardbench.prompts`, the image as the same ``data:`` URL an ``api:`` judge
  sends, scored by :mod:`medrewardbench.parsing` with verdicts mapped back to source order.
* :mod:`~medrewardbench.integrations.inspect.logs`: eval logs of that task read and checked against
  the data (``medrewardbench import-inspect``).
* :mod:`~medrewardbench.integrations.inspect.importing`: those samples stored as a run in the
  results store, with the fingerprints and case hashes ``eval`` gives.

Every module here needs ``inspect_ai`` (``pip install 'medrewardbench[inspect]'``); this package's
``__init__`` imports none of them, so naming it costs nothing.
"""
