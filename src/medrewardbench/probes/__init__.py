"""Probes: derived data sets whose labels are true by construction, judged like any other data.

* :mod:`~medrewardbench.probes.derive`: the shared plumbing (derived cases and benchmarks, their
  runs in the parent's store, paired verdicts and paired case-bootstrap intervals);
* :mod:`~medrewardbench.probes.grounding`: does a verdict depend on the image (no image, a blank
  image, another patient's image, a wrong DICOM window);
* :mod:`~medrewardbench.probes.page`: the grounding probe's HTML page in the report's look;
* :mod:`~medrewardbench.probes.harm`: each judge's critical-miss rate on the pairs doctors flagged
  as severely harmful in the annotation app.

Only the command line imports this package.
"""
