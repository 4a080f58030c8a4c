"""Bridges to the evaluation tools teams already run (inspect_ai, lmms-eval).

Each bridge shows medrewardbench's data to another tool with this package's own prompt, image
handling and verdict parser, and brings that tool's results back into the results store as runs,
so that ``report``, ``leaderboard`` and ``compare`` read them like any other. A bridge is used by
the command line and by the other tool's plugin mechanism (an entry point); nothing else in the
package imports it.
"""
