"""Many judges at scale: sweep files, served models, Ray clusters, juries, cost and the Batch API.

Only the command line imports this package (``medrewardbench sweep``). The modules:

* :mod:`.config`: the sweep file, checked with the line of every problem;
* :mod:`.run`: the job (:func:`run_sweep`): one store, one lock, one report;
* :mod:`.dispatch`: batches to backends, results to the store (the driver is its only writer);
* :mod:`.served`: model servers started, awaited and stopped for their entries, each under its
  :mod:`.supervisor` so it dies with the sweep, and recorded (:mod:`.served_groups`) so a leftover is
  stopped at the next start;
* :mod:`.ray_backend`: an actor per entry on a Ray cluster (optional extra ``ray``);
* :mod:`.jury`: strict weighted majority with counted abstentions;
* :mod:`.budget`: prices, the budget and per-endpoint caps;
* :mod:`.batch_api`: the provider's Batch API, resumable and never submitted twice.
"""

from medrewardbench.sweep.config import JudgeEntry, JuryEntry, SweepConfig, load_prices, load_sweep
from medrewardbench.sweep.errors import (
    DataMismatchError,
    EntryFailed,
    ServerDiedError,
    ServerError,
    ServerStartError,
    SweepFileError,
)
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress
from medrewardbench.sweep.run import SweepOptions, SweepResult, load_sweep_data, run_sweep

__all__ = [
    "DataMismatchError",
    "EntryFailed",
    "EntryOutcome",
    "JudgeEntry",
    "JuryEntry",
    "ServerDiedError",
    "ServerError",
    "ServerStartError",
    "SweepConfig",
    "SweepFileError",
    "SweepOptions",
    "SweepProgress",
    "SweepResult",
    "load_prices",
    "load_sweep",
    "load_sweep_data",
    "run_sweep",
]
