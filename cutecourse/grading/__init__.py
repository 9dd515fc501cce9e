"""Exercises and grading: build exercises from solutions, check cells, and the grader (nbval plus hidden tests).

Notebooks are read as plain JSON, so the hidden-test half of the grader runs on machines without jupyter.
"""
