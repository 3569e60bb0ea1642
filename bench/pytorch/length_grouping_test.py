"""Tests for bench/pytorch/length_grouping.py: python3 bench/pytorch/length_grouping_test.py
(ctest -R bench_length_grouping)."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from length_grouping import group_by_length  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "..", "tests", "fixtures", "data", "length_grouping_hf.json")


class GroupByLengthTest(unittest.TestCase):
    def test_matches_transformers_from_the_same_permutation(self):
        with open(FIXTURE) as f:
            cases = json.load(f)
        self.assertEqual(len(cases), 4)
        for c in cases:
            with self.subTest(c["name"]):
                self.assertEqual(group_by_length(list(c["order"]), c["lengths"], c["batch_size"]), c["grouped"])

    def test_keeps_every_index_once(self):
        lengths = [i % 7 for i in range(100)]
        order = list(range(99, -1, -1))
        self.assertEqual(sorted(group_by_length(order, lengths, 3)), list(range(100)))


if __name__ == "__main__":
    unittest.main()
