"""Probes: derived data sets whose better answer is known by construction (grounding, counterfactual, bias)."""
