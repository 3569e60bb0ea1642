"""Combining several models' predictions on the same texts (bench/classic_baselines.py --tandem-seeds).

Each model gives, per text, its label and that label's probability (what `tandem predict` prints).
The vote needs no more than that: per text, the label most models predict; when labels tie on
votes (e.g. three models, three labels), the tied label predicted with the highest probability.
"""
import collections


def majority_vote(members):
    """members: one list per model of (label, probability) per text, all of the same length."""
    if not members:
        raise ValueError("majority_vote: no models")
    if len({len(m) for m in members}) != 1:
        raise ValueError(f"majority_vote: the models predict {sorted({len(m) for m in members})} texts")
    out = []
    for votes in zip(*members):
        count = collections.Counter(label for label, _ in votes)
        top = max(count.values())
        out.append(max((p, label) for label, p in votes if count[label] == top)[1])
    return out
