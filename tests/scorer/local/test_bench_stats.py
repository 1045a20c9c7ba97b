"""The statistics of bench/quality.py: the AUROC every quality claim rests on."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def quality():
    from bench import quality

    return quality


def test_auroc_extremes_and_ties(quality) -> None:
    assert quality.auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert quality.auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert quality.auroc([0.5] * 6, [0, 1, 0, 1, 0, 1]) == 0.5  # constant score: chance
    # one tie across classes counts half: pairs (p, n) = (0.5>0.1) (0.5=0.5) (0.9>0.1) (0.9>0.5)
    assert quality.auroc([0.1, 0.5, 0.5, 0.9], [0, 0, 1, 1]) == pytest.approx(3.5 / 4)
    assert np.isnan(quality.auroc([0.1, 0.2], [1, 1]))


def test_auroc_matches_the_pairwise_definition(quality) -> None:
    rng = np.random.default_rng(7)
    s = rng.integers(0, 5, size=60).astype(float)  # many ties
    y = rng.integers(0, 2, size=60)
    pos, neg = s[y == 1], s[y == 0]
    pairwise = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
    assert quality.auroc(s, y) == pytest.approx(pairwise / (len(pos) * len(neg)))


def test_balanced_accuracy_and_length_bins(quality) -> None:
    assert quality.balanced_accuracy([1, 1, 1, 1], [1, 1, 0, 0]) == 0.5
    assert quality.balanced_accuracy([1, 0, 0, 0], [1, 1, 0, 0]) == 0.75
    # a score that is only the (negated) length separates perfectly overall, not inside bins
    lengths = [1, 2, 3, 4, 10, 11, 12, 13]
    labels = [1, 1, 0, 0, 1, 1, 0, 0]
    overall = quality.auroc([-n for n in lengths], [1, 1, 1, 1, 0, 0, 0, 0])
    assert overall == 1.0
    mean, rows = quality.binned_auroc([0.5] * 8, labels, lengths, bins=2)
    assert mean == 0.5 and len(rows) == 2


def test_group_of_keeps_pairs_together(quality) -> None:
    assert quality.group_of("halueval-12-right") == quality.group_of("halueval-12-halu")
    assert quality.group_of("jsquad-dev-3-pos") == quality.group_of("jsquad-dev-3-neg")
    assert quality.group_of("halueval-0-ctx-own") == quality.group_of("halueval-0-ctx-other")
