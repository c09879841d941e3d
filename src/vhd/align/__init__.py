"""Aligning the annotator with people.

Human labels, in-context example search, agreement with human ratings (SMID), the review queue
and the cost/quality comparison.
"""
