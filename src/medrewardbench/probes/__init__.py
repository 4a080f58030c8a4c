"""Probes: derived data sets whose labels are true by construction, judged like any other data.

* :mod:`~medrewardbench.probes.derive`: the shared plumbing (derived cases and benchmarks, their
  runs in the parent's store, paired verdicts and paired case-bootstrap intervals);
* :mod:`~medrewardbench.probes.grounding`: does a verdict depend on the image (no image, a blank
  image, another patient's image, a wrong DICOM window);
* :mod:`~medrewardbench.probes.page`: the probe's HTML page in the report's look.

Only the command line imports this package.
"""
