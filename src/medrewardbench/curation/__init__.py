"""Build a benchmark the way Med-RewardBench was built: questions, a difficulty filter, a response pool, pairs, labels.

One project directory holds one SQLite store (:mod:`~medrewardbench.curation.store`); every step
reads and writes it chunk by chunk, so a project of any size runs in bounded memory:

1. :mod:`~medrewardbench.curation.importer`: questions in from JSONL, JSON, parquet or ``hf:`` data
   sets through a column mapping, validated like the case loaders, pooled from several sources.
2. :mod:`~medrewardbench.curation.filtering`: small models answer every question
   (:mod:`~medrewardbench.curation.generators`, :mod:`~medrewardbench.curation.generation`); closed
   answers are scored by normalised match (:mod:`~medrewardbench.curation.scoring`), open ones by a
   grader (:mod:`~medrewardbench.curation.grading`); a question is kept when at most K models got it right.
3. :mod:`~medrewardbench.curation.pool`: N generators answer every kept question, resumably.
4. :mod:`~medrewardbench.curation.pairs`: two responses per question from different generators,
   seeded, duplicates skipped, optionally length-balanced, as canonical cases without labels.
5. :mod:`~medrewardbench.curation.labels` and :mod:`~medrewardbench.curation.export`: per-annotator
   labels in, the labelled set out (canonical or the reference layout) with a dataset card.
6. :mod:`~medrewardbench.curation.report`: what was dropped, per source and organ system.

Only the command line (:mod:`medrewardbench.cli.build`) imports this package.
"""
