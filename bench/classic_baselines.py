r"""Tandem against two classical text classifiers on the same splits.

Systems, each trained on the same seeded split and scored on the same held-out texts:
  - tandem: `tandem train` with a given config (the data written as CSV and read by
    Tandem's csv format); accuracy and macro-F1 from its results.json (the test split);
  - fasttext: Debian's `fasttext supervised -epoch 25 -wordNgrams 2` (apt-get install fasttext);
  - tfidf_svm: scikit-learn TF-IDF over character 2-5-grams (sublinear tf) + LinearSVC (C=1, or
    --svm-c).
Reports accuracy, macro-F1 and training wall time per system and split, and the mean over
splits, as JSON and a markdown table. Not run in CI.

--select chooses without the test split (bench/model_selection.py): Tandem's config among the
base config and the --variants, and the SVM's C among --svm-c, each on a validation split
carved from the split's training part (grouped like the test split); the choice is retrained
on the whole training part and scored on the test split once. The JSON keeps every candidate's
validation scores and the choice. fastText keeps its fixed settings. --tandem-seeds trains each
Tandem config once per seed and scores the majority vote of their predictions; the members'
own scores stay in the JSON.

  /opt/benchvenv/bin/python bench/classic_baselines.py --dataset debian-sections --seeds 0 1 2 3 4 5 \
      --tandem build/apps/tandem --config configs/fortunes_ngrams.yaml \
      --select --select-one-seed --svm-c 1 0.1 0.3 3 10 --tandem-seeds 42 43 44 \
      --variant w1:tokenizer.word_ngrams=1 --json docs/results/classifiers_vs_baselines/select-debian-sections.json

Data sets, built from Debian-shipped text:
  fortunes-demo   the demo's fortune categories (computers, food, politics, sports, startrek),
                  stratified 90/10 split per seed;
  debian-sections package descriptions (apt-cache dumpavail: short + long description) of
                  eight archive sections; texts deduplicated, at most --per-class per section,
                  split 90/10 by source package so that sibling packages with near-identical
                  descriptions never straddle the split.

  /opt/benchvenv/bin/python bench/classic_baselines.py --dataset fortunes-demo --seeds 0 1 2 \
      --tandem build/apps/tandem --config configs/fortunes_demo.yaml \
      --json docs/results/classifiers_vs_baselines/fortunes-demo.json
"""
import argparse
import collections
import csv
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import accuracy_score, f1_score
from sklearn.svm import LinearSVC

from majority_vote import majority_vote
from model_selection import grouped_split, select_and_test

FORTUNES = "/usr/share/games/fortunes"
DEMO_CATEGORIES = ["computers", "food", "politics", "sports", "startrek"]
SECTIONS = ["games", "science", "sound", "graphics", "hamradio", "electronics", "mail", "editors"]


def read_fortunes(categories):
    data = []
    for cat in categories:
        with open(os.path.join(FORTUNES, cat), encoding="utf-8", errors="strict") as f:
            entry = []
            for line in f.read().lstrip("\ufeff").split("\n"):
                if line == "%":
                    text = "\n".join(entry).strip()
                    if text:
                        data.append((text, cat, None))
                    entry = []
                else:
                    entry.append(line)
            text = "\n".join(entry).strip()
            if text:
                data.append((text, cat, None))
    return data


def read_debian_sections(per_class, seed):
    """(text, section, source package) from `apt-cache dumpavail`, deduplicated, capped per section."""
    out = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
    by_section = collections.defaultdict(list)
    seen = set()
    for para in out.split("\n\n"):
        fields, key = {}, None
        for line in para.split("\n"):
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        section = fields.get("Section", "").split("/")[-1]
        if section not in SECTIONS or "Description" not in fields:
            continue
        lines = fields["Description"].split("\n")
        body = [l.strip() for l in lines[1:] if l.strip() != "."]
        text = (lines[0] + "\n" + "\n".join(body)).strip()
        if text in seen:
            continue
        seen.add(text)
        source = fields.get("Source", fields.get("Package", "")).split(" ")[0]
        by_section[section].append((text, section, source))
    rng = random.Random(seed)
    data = []
    for section in SECTIONS:
        items = sorted(by_section[section])
        rng.shuffle(items)
        data.extend(items[:per_class])
    return data


def split(data, seed, test_fraction=0.1):
    """About test_fraction of each label held out; items sharing a source package go to one side together."""
    return grouped_split(data, 1000 + seed, test_fraction)


def one_line(text):
    return re.sub(r"\s+", " ", text).strip()


def scores(y_true, y_pred, labels):
    return {"accuracy": accuracy_score(y_true, y_pred),
            "macro_f1": f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)}


def run_tandem(args, train, test, labels, work, extra_sets, seeds):
    """One `tandem train` (seeds empty: the config's seed), or one per seed and their majority vote on the
    test texts."""
    train_csv, test_csv = os.path.join(work, "train.csv"), os.path.join(work, "test.csv")
    for path, rows in ((train_csv, train), (test_csv, test)):
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["label", "text"])
            for text, label, _ in rows:
                w.writerow([label, text])
    base_sets = ["data.format=csv", f"data.train_path={train_csv}", f"data.test_path={test_csv}", "data.header=true",
                 "data.label_column=label", "data.text_columns=[text]", f"data.class_names=[{', '.join(labels)}]",
                 "save_steps=0", "save_total_limit=1"] + args.tandem_set + extra_sets

    def train_one(out_dir, seed_sets):
        cmd = [args.tandem, "train", "--config", args.config, "--quiet"]
        for s in base_sets + [f"output_dir={out_dir}"] + seed_sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(os.path.join(out_dir, "results.json")))

    start = time.perf_counter()
    if not seeds:
        result = train_one(os.path.join(work, "tandem_out"), [])
        seconds = time.perf_counter() - start
        # Tandem's own test-split scores (scikit-learn's definitions: tests/train/evaluation_test.cc).
        s = {"accuracy": result["eval_accuracy"], "macro_f1": result["eval_macro_f1"]}
        s["train_seconds"] = seconds
        s["steps"] = result["steps"]
        if "best_model" in result:
            s["best_step"] = result["best_model"]["step"]
        return s
    text_file = os.path.join(work, "test_texts.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        for text, _, _ in test:
            f.write(one_line(text) + "\n")
    members, member_scores = [], []
    for seed in seeds:
        out_dir = os.path.join(work, f"tandem_out_seed{seed}")
        result = train_one(out_dir, [f"seed={seed}"])
        members.append(tandem_predictions(args, out_dir, text_file, len(test)))
        member = scores([l for _, l, _ in test], [label for label, _ in members[-1]], labels)
        # The prediction path (one line per text, `tandem predict`) against Tandem's own evaluation.
        member["tandem_eval_accuracy"] = result["eval_accuracy"]
        member_scores.append(member)
    seconds = time.perf_counter() - start
    s = scores([l for _, l, _ in test], majority_vote(members), labels)
    s["train_seconds"] = seconds
    s["members"] = member_scores
    return s


def tandem_predictions(args, out_dir, text_file, n):
    """[(label, probability of that label)] for each line of text_file, from out_dir's checkpoint."""
    checkpoints = sorted((d for d in os.listdir(out_dir) if d.startswith("checkpoint-")),
                         key=lambda d: int(d.split("-")[1]))
    out = subprocess.run([args.tandem, "predict", "--checkpoint", os.path.join(out_dir, checkpoints[-1]),
                          "--input", text_file], check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t", 2) for line in out.splitlines() if line]
    if len(rows) != n:
        raise RuntimeError(f"tandem predict on {text_file}: {len(rows)} predictions for {n} texts")
    return [(label, float(p)) for label, p, _ in rows]


def run_fasttext(args, train, test, labels, work):
    def write(path, rows):
        with open(path, "w", encoding="utf-8") as f:
            for text, label, _ in rows:
                f.write(f"__label__{label} {one_line(text)}\n")
    tr, te = os.path.join(work, "ft_train.txt"), os.path.join(work, "ft_test.txt")
    write(tr, train)
    write(te, test)
    model = os.path.join(work, "ft_model")
    start = time.perf_counter()
    subprocess.run(["fasttext", "supervised", "-input", tr, "-output", model, "-epoch", "25", "-wordNgrams", "2",
                    "-thread", "2", "-seed", "0"] + args.fasttext_args, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    pred = subprocess.run(["fasttext", "predict", model + ".bin", te], check=True, capture_output=True,
                          text=True).stdout.splitlines()
    y_pred = [p.replace("__label__", "") for p in pred]
    s = scores([l for _, l, _ in test], y_pred, labels)
    s["train_seconds"] = seconds
    return s


def run_svm(train, test, labels, c=1.0):
    start = time.perf_counter()
    vec = TfidfVectorizer(analyzer="char", ngram_range=(2, 5), sublinear_tf=True, lowercase=True)
    x = vec.fit_transform([t for t, _, _ in train])
    clf = LinearSVC(C=c).fit(x, [l for _, l, _ in train])
    seconds = time.perf_counter() - start
    y_pred = clf.predict(vec.transform([t for t, _, _ in test]))
    s = scores([l for _, l, _ in test], list(y_pred), labels)
    s["train_seconds"] = seconds
    return s


def write_report(args, data, runs):
    counts = collections.Counter(l for _, l, _ in data)
    report = {"dataset": args.dataset, "examples": len(data), "classes": dict(sorted(counts.items())),
              "majority_share": max(counts.values()) / len(data), "command": " ".join(sys.argv),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, args.json)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=["fortunes-demo", "debian-sections"], required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--per-class", type=int, default=400, help="debian-sections: texts kept per section")
    p.add_argument("--tandem", default="build/apps/tandem")
    p.add_argument("--config", default="configs/fortunes_demo.yaml")
    p.add_argument("--tandem-set", action="append", default=[], help="extra --set for every Tandem run")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:key=value,key=value: an extra Tandem run per split with these --set overrides")
    p.add_argument("--tandem-seeds", type=int, nargs="*", default=[],
                   help="train every Tandem config once per seed and score the majority vote of their "
                        "predictions (`tandem predict`; a tie goes to the most confident)")
    p.add_argument("--select-one-seed", action="store_true",
                   help="--select with --tandem-seeds: compare the candidates as single models of the first "
                        "seed; only the choice is trained with every seed")
    p.add_argument("--fasttext-args", nargs="*", default=[])
    p.add_argument("--select", action="store_true",
                   help="choose Tandem's config among the base and the --variants, and the SVM's C among --svm-c, "
                        "on a validation split of each training part; retrain the choice on the whole training "
                        "part and score it on the test split once (bench/model_selection.py)")
    p.add_argument("--validation-only", action="store_true",
                   help="--select without its last step: every candidate's validation scores, no test scores "
                        "(fastText is skipped)")
    p.add_argument("--validation-fraction", type=float, default=0.1, help="--select: share of the training part")
    p.add_argument("--svm-c", type=float, nargs="+", default=[1.0],
                   help="the SVM's C; several only with --select (the first wins ties)")
    p.add_argument("--json", required=True, help="where the per-split results go")
    args = p.parse_args()
    if args.validation_only and not args.select:
        p.error("--validation-only needs --select")
    if args.select_one_seed and not (args.select and len(args.tandem_seeds) > 1):
        p.error("--select-one-seed needs --select and several --tandem-seeds")
    if len(args.svm_c) > 1 and not args.select:
        p.error("--svm-c with several values needs --select (otherwise C would be chosen on the test split)")
    if not 0 < args.validation_fraction < 1:
        p.error(f"--validation-fraction must be in (0, 1), got {args.validation_fraction}")
    for v in args.variant:
        if ":" not in v or not v.split(":", 1)[0] or "=" not in v.split(":", 1)[1]:
            p.error(f"--variant {v!r}: expected NAME:key=value[,key=value...]")
    variants = [("tandem", [])] + [(v.split(":", 1)[0], v.split(":", 1)[1].split(",")) for v in args.variant]
    if len({n for n, _ in variants}) != len(variants):
        p.error(f"--variant names must differ from each other and from 'tandem': {[n for n, _ in variants]}")

    if args.dataset == "fortunes-demo":
        data = read_fortunes(DEMO_CATEGORIES)
    else:
        data = read_debian_sections(args.per_class, seed=0)
    labels = sorted({l for _, l, _ in data})
    runs = []
    for seed in args.seeds:
        train, test = split(data, seed)
        with tempfile.TemporaryDirectory(prefix="tandem_baselines_") as work:
            row = {"seed": seed, "train": len(train), "test": len(test)}
            if args.select:
                row["tfidf_svm"] = select_and_test(
                    [(f"C={c:g}", c) for c in args.svm_c], train, test, seed, args.validation_fraction,
                    lambda c, fit, held_out, final: run_svm(fit, held_out, labels, c), not args.validation_only)
            else:
                row["tfidf_svm"] = run_svm(train, test, labels, args.svm_c[0])
            if not args.validation_only:
                row["fasttext"] = run_fasttext(args, train, test, labels, work)
            if args.select:
                row["tandem"] = select_and_test(
                    variants, train, test, seed, args.validation_fraction,
                    lambda sets, fit, held_out, final: run_tandem(
                        args, fit, held_out, labels, work, sets,
                        args.tandem_seeds if final or not args.select_one_seed else args.tandem_seeds[:1]),
                    not args.validation_only)
            else:
                for name, sets in variants:
                    row[name] = run_tandem(args, train, test, labels, work, sets, args.tandem_seeds)
            runs.append(row)
            print(json.dumps(row), flush=True)
            write_report(args, data, runs)  # after every split, so an interrupted run keeps what it measured
    if args.validation_only:
        print(f"\n| system | candidate | validation accuracy (mean) | per split |  ({len(runs)} splits)\n|---|---|---:|---|")
        for s in ("tfidf_svm", "tandem"):
            for name in runs[0][s]["validation"]:
                accs = [r[s]["validation"][name]["accuracy"] for r in runs]
                print(f"| {s} | {name} | {sum(accs) / len(accs):.3f} | {' / '.join(f'{a:.3f}' for a in accs)} |")
        return
    systems = ["tfidf_svm", "fasttext"] + ([n for n, _ in variants] if not args.select else ["tandem"])
    print(f"\n| system | accuracy | macro-F1 | train time (s) |  ({len(runs)} splits, mean)\n|---|---:|---:|---:|")
    for s in systems:
        m = {k: sum(r[s][k] for r in runs) / len(runs) for k in ("accuracy", "macro_f1", "train_seconds")}
        chosen = ", ".join(r[s]["chosen"] for r in runs if "chosen" in r[s])
        print(f"| {s} | {m['accuracy']:.3f} | {m['macro_f1']:.3f} | {m['train_seconds']:.1f} |"
              + (f" chosen per split: {chosen}" if chosen else ""))


if __name__ == "__main__":
    main()
