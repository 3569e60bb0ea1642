"""Tests for bench/majority_vote.py: python3 bench/majority_vote_test.py (ctest -R bench_majority_vote)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from majority_vote import majority_vote  # noqa: E402


class MajorityVoteTest(unittest.TestCase):
    def test_the_label_most_models_predict_wins_over_a_more_confident_one(self):
        members = [[("a", 0.4)], [("a", 0.4)], [("b", 0.99)]]
        self.assertEqual(majority_vote(members), ["a"])

    def test_a_three_way_tie_goes_to_the_most_confident(self):
        members = [[("a", 0.5)], [("b", 0.7)], [("c", 0.6)]]
        self.assertEqual(majority_vote(members), ["b"])

    def test_a_tie_is_broken_among_the_tied_labels_only(self):
        # Two votes each for a and b; c is the most confident but has one vote.
        members = [[("a", 0.6)], [("a", 0.5)], [("b", 0.7)], [("b", 0.4)], [("c", 0.95)]]
        self.assertEqual(majority_vote(members), ["b"])

    def test_one_model_is_its_own_prediction(self):
        self.assertEqual(majority_vote([[("a", 0.3), ("b", 0.9)]]), ["a", "b"])

    def test_votes_text_by_text(self):
        members = [[("a", 0.9), ("x", 0.5)], [("b", 0.8), ("y", 0.5)], [("a", 0.6), ("y", 0.6)]]
        self.assertEqual(majority_vote(members), ["a", "y"])

    def test_models_of_different_lengths_are_an_error(self):
        with self.assertRaisesRegex(ValueError, r"\[1, 2\] texts"):
            majority_vote([[("a", 0.5)], [("a", 0.5), ("b", 0.5)]])

    def test_no_models_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "no models"):
            majority_vote([])


if __name__ == "__main__":
    unittest.main()
