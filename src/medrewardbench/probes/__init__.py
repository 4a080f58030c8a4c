"""Probes: derived data sets whose labels are true by construction, judged like any other data.

* :mod:`~medrewardbench.probes.derive`: the shared plumbing (derived cases and benchmarks, their
  runs in the parent's store, paired verdicts and paired case-bootstrap intervals);
* :mod:`~medrewardbench.probes.grounding`: does a verdict depend on the image (no image, a blank
  image, another patient's image, a wrong DICOM window); its page in
  :mod:`~medrewardbench.probes.grounding_page`;
* :mod:`~medrewardbench.probes.edits`: the rule-based text edits (injected errors by type and
  severity, harmless variants, bias cues); :mod:`~medrewardbench.probes.pairs`: pairs built from
  them, run and counted; :mod:`~medrewardbench.probes.counterfactual` (does the judge catch a
  clinical error and leave harmless rewording alone) and :mod:`~medrewardbench.probes.bias` (the
  bias card); their pages in :mod:`~medrewardbench.probes.pairs_page`;
* :mod:`~medrewardbench.probes.harm`: each judge's critical-miss rate on the pairs doctors flagged
  as severely harmful in the annotation app.

Only the command line imports this package.
"""
