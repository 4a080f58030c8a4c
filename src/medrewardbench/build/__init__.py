"""Build a benchmark the way Med-RewardBench was built: questions, a difficulty filter, a response pool, pairs, labels.

One project directory holds one SQLite store (:mod:`~medrewardbench.build.store`); every step
reads and writes it chunk by chunk, so a project of any size runs in bounded memory:

1. :mod:`~medrewardbench.build.importer`: questions in from JSONL, JSON, parquet or ``hf:`` data
   sets through a column mapping, validated like the case loaders, pooled from several sources.
2. :mod:`~medrewardbench.build.filtering`: small models answer every question
   (:mod:`~medrewardbench.build.generators`, :mod:`~medrewardbench.build.generation`); closed
   answers are scored by normalised match (:mod:`~medrewardbench.build.scoring`), open ones by a
   grader (:mod:`~medrewardbench.build.grading`); a question is kept when at most K models got it right.
3. :mod:`~medrewardbench.build.pool`: N generators answer every kept question, resumably.
4. :mod:`~medrewardbench.build.pairs`: two responses per question from different generators,
   seeded, duplicates skipped, optionally length-balanced, as canonical cases without labels.
5. :mod:`~medrewardbench.build.labels` and :mod:`~medrewardbench.build.export`: per-annotator
   labels in, the labelled set out (canonical or the reference layout) with a dataset card.
6. :mod:`~medrewardbench.build.report`: what was dropped, per source and organ system.

Only the command line (:mod:`medrewardbench.cli.build`) imports this package.
"""
