"""Tests for bench/model_selection.py: python3 bench/model_selection_test.py (ctest -R bench_model_selection)."""
import collections
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_selection import choose, grouped_split, select_and_test, validation_seed  # noqa: E402


def texts(n_per_label, labels=("a", "b", "c"), group_size=1):
    """(text, label, group): groups of group_size texts of one label; group None when group_size is 1."""
    out = []
    for label in labels:
        for i in range(n_per_label):
            group = None if group_size == 1 else f"{label}{i // group_size}"
            out.append((f"{label} text {i}", label, group))
    return out


class GroupedSplitTest(unittest.TestCase):
    def test_parts_are_disjoint_and_cover_the_data(self):
        data = texts(50)
        rest, held_out = grouped_split(data, seed=7, fraction=0.1)
        self.assertEqual(sorted(rest + held_out), sorted(data))
        self.assertFalse(set(rest) & set(held_out))

    def test_holds_out_the_fraction_of_each_label(self):
        rest, held_out = grouped_split(texts(50), seed=7, fraction=0.2)
        self.assertEqual(collections.Counter(l for _, l, _ in held_out), {"a": 10, "b": 10, "c": 10})

    def test_a_group_never_straddles_the_split(self):
        rest, held_out = grouped_split(texts(60, group_size=3), seed=3, fraction=0.1)
        self.assertFalse({g for _, _, g in rest} & {g for _, _, g in held_out})
        self.assertTrue(held_out)

    def test_same_seed_same_split_other_seed_other_split(self):
        data = texts(50)
        self.assertEqual(grouped_split(data, 1, 0.1), grouped_split(data, 1, 0.1))
        self.assertNotEqual(grouped_split(data, 1, 0.1)[1], grouped_split(data, 2, 0.1)[1])

    def test_validation_seed_differs_from_every_test_split_seed(self):
        # The test split of seed s uses 1000 + s (classic_baselines.split); splits 0-999 never collide.
        self.assertFalse({validation_seed(s) for s in range(1000)} & {1000 + s for s in range(1000)})


class ChooseTest(unittest.TestCase):
    def test_picks_the_highest_validation_accuracy(self):
        self.assertEqual(choose([("x", {"accuracy": 0.7}), ("y", {"accuracy": 0.9}), ("z", {"accuracy": 0.8})]), "y")

    def test_a_tie_goes_to_the_first_listed(self):
        self.assertEqual(choose([("default", {"accuracy": 0.8}), ("other", {"accuracy": 0.8})]), "default")

    def test_no_candidates_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "no candidates"):
            choose([])


class SelectAndTestTest(unittest.TestCase):
    def setUp(self):
        self.train, self.test = grouped_split(texts(40, group_size=2), seed=1000, fraction=0.1)
        self.calls = []
        # A fake learner: its "accuracy" is its setting, so the best setting is known in advance.
        self.scores = {"low": 0.5, "high": 0.9, "mid": 0.7}

    def fit_and_score(self, setting, fit, held_out, final):
        self.calls.append((setting, list(fit), list(held_out), final))
        return {"accuracy": self.scores[setting], "macro_f1": self.scores[setting] / 2}

    def test_chooses_on_validation_and_scores_the_test_split_once(self):
        r = select_and_test([("l", "low"), ("h", "high"), ("m", "mid")], self.train, self.test, 0, 0.1,
                            self.fit_and_score)
        self.assertEqual(r["chosen"], "h")
        self.assertEqual(r["validation"], {"l": {"accuracy": 0.5, "macro_f1": 0.25},
                                           "h": {"accuracy": 0.9, "macro_f1": 0.45},
                                           "m": {"accuracy": 0.7, "macro_f1": 0.35}})
        on_test = [c for c in self.calls if c[2] == self.test]
        self.assertEqual(len(on_test), 1)
        self.assertEqual(on_test[0][0], "high")
        self.assertEqual(r["accuracy"], 0.9)

    def test_the_choice_is_retrained_on_the_whole_training_part(self):
        select_and_test([("l", "low"), ("h", "high")], self.train, self.test, 0, 0.1, self.fit_and_score)
        self.assertEqual(self.calls[-1][1], self.train)

    def test_selection_never_sees_a_test_text(self):
        select_and_test([("l", "low"), ("h", "high")], self.train, self.test, 0, 0.1, self.fit_and_score)
        test_texts = set(self.test)
        for setting, fit, held_out, _ in self.calls[:-1]:
            self.assertFalse(test_texts & set(fit))
            self.assertFalse(test_texts & set(held_out))

    def test_candidates_fit_on_the_training_part_minus_validation(self):
        r = select_and_test([("l", "low"), ("h", "high")], self.train, self.test, 0, 0.1, self.fit_and_score)
        for setting, fit, held_out, _ in self.calls[:-1]:
            self.assertEqual(sorted(fit + held_out), sorted(self.train))
            self.assertFalse({g for _, _, g in fit} & {g for _, _, g in held_out})
            self.assertEqual(len(held_out), r["validation_size"])
        # Every candidate sees the same validation split.
        self.assertEqual(self.calls[0][2], self.calls[1][2])

    def test_only_the_test_run_is_marked_final(self):
        select_and_test([("l", "low"), ("h", "high")], self.train, self.test, 0, 0.1, self.fit_and_score)
        self.assertEqual([c[3] for c in self.calls], [False, False, True])

    def test_without_test_scoring_the_test_split_is_untouched(self):
        r = select_and_test([("l", "low"), ("h", "high")], self.train, self.test, 0, 0.1, self.fit_and_score,
                            score_test=False)
        self.assertEqual(r["chosen"], "h")
        self.assertNotIn("accuracy", r)
        self.assertEqual(len(self.calls), 2)

    def test_repeated_candidate_names_are_an_error(self):
        with self.assertRaisesRegex(ValueError, "repeat"):
            select_and_test([("a", "low"), ("a", "high")], self.train, self.test, 0, 0.1, self.fit_and_score)

    def test_a_validation_split_that_leaves_nothing_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "leaves 3 to fit and 0 to validate"):
            select_and_test([("l", "low")], texts(1), self.test, 0, 0.1, self.fit_and_score)


if __name__ == "__main__":
    unittest.main()
