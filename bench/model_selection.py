"""Choosing a system's hyperparameters without looking at the test split.

The protocol of bench/classic_baselines.py --select, per split:
  1. carve a validation split out of the TRAINING part only (grouped like the test split:
     texts sharing a group, e.g. a Debian source package, stay on one side);
  2. train every candidate on the rest of the training part and score it on the validation
     split;
  3. pick the candidate with the highest validation accuracy (ties: the first listed, so the
     default goes first);
  4. retrain the chosen candidate on the whole training part and score it on the test split,
     once.
Only step 4 sees the test split. Pure Python (no scikit-learn), so that
bench/model_selection_test.py runs with any python3.
"""
import collections
import random


def grouped_split(data, seed, fraction):
    """(rest, held_out): about `fraction` of each label held out, seeded.

    data: (text, label, group) tuples; items sharing a group (not None) go to one side together
    (an item whose group is None is its own group). A label gets at most 1.2x its share, so a big
    group can leave a label short. Deterministic for a given seed and data order.
    """
    rng = random.Random(seed)
    groups = collections.defaultdict(list)
    for i, item in enumerate(data):
        groups[item[2] if item[2] is not None else i].append(item)
    keys = sorted(groups, key=str)
    rng.shuffle(keys)
    want = {l: round(n * fraction) for l, n in collections.Counter(l for _, l, _ in data).items()}
    taken = collections.Counter()
    rest, held_out = [], []
    for k in keys:
        items = groups[k]
        label = collections.Counter(l for _, l, _ in items).most_common(1)[0][0]
        if taken[label] < want[label] and taken[label] + len(items) <= max(1, want[label] * 1.2):
            held_out.extend(items)
            taken.update(l for _, l, _ in items)
        else:
            rest.extend(items)
    return rest, held_out


def validation_seed(split_seed):
    """The validation carve's seed: distinct from the test split's (1000 + seed) for every split."""
    return 2000 + split_seed


def choose(validation_scores):
    """The name with the highest validation accuracy; ties go to the first in the given order.

    validation_scores: [(name, {"accuracy": ...}), ...] in the grid's order.
    """
    if not validation_scores:
        raise ValueError("choose: no candidates")
    best_name, best = validation_scores[0][0], validation_scores[0][1]["accuracy"]
    for name, s in validation_scores[1:]:
        if s["accuracy"] > best:
            best_name, best = name, s["accuracy"]
    return best_name


def select_and_test(candidates, train, test, seed, fraction, fit_and_score, score_test=True):
    """The protocol above for one system on one split (steps 1-3 only when score_test is False:
    for comparing candidates on validation while the test split stays untouched).

    candidates: [(name, settings), ...], the default first. fit_and_score(settings, fit_data,
    eval_data, final) trains on fit_data and returns scores on eval_data (a dict with "accuracy");
    final is True only for the test run (a system may train its final model differently, e.g. as
    an ensemble of several seeds where the candidates were compared as single models).
    Returns {"chosen", "validation": {name: scores}, "train", "validation_size", **test scores}.
    """
    names = [name for name, _ in candidates]
    if len(set(names)) != len(names):
        raise ValueError(f"select: candidate names repeat: {names}")
    fit, validation = grouped_split(train, validation_seed(seed), fraction)
    if not fit or not validation:
        raise ValueError(f"select: validation fraction {fraction} of {len(train)} training texts leaves "
                         f"{len(fit)} to fit and {len(validation)} to validate")
    on_validation = [(name, fit_and_score(settings, fit, validation, False)) for name, settings in candidates]
    chosen = choose(on_validation)
    result = dict(fit_and_score(dict(candidates)[chosen], train, test, True)) if score_test else {}
    result.update({"chosen": chosen, "validation": dict(on_validation), "fit_size": len(fit),
                   "validation_size": len(validation)})
    return result
