# Exploration for docs/results/classifiers_vs_baselines.md (2026-11-25, evening); run from the repository root
# with /opt/benchvenv/bin/python (scikit-learn). Not part of the build or CI.
import sys
sys.path.insert(0, "bench")
import classic_baselines as cb
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
import numpy as np
ds = sys.argv[1]
data = cb.read_fortunes(cb.DEMO_CATEGORIES) if ds == "fortunes-demo" else cb.read_debian_sections(400, 0)
splits = [cb.split(data, s) for s in (0,1,2)]
feats = {"tfidf_l2": dict(binary=False, sublinear_tf=True, use_idf=True, norm="l2"),
         "bin_l1": dict(binary=True, use_idf=False, norm="l1"),
         "bin_l2": dict(binary=True, use_idf=False, norm="l2")}
for fname, f in feats.items():
    X = []
    for tr, te in splits:
        v = TfidfVectorizer(analyzer="char_wb", ngram_range=(2,5), **f)
        X.append((v.fit_transform([t for t,_,_ in tr]), v.transform([t for t,_,_ in te]), [l for _,l,_ in tr], np.array([l for _,l,_ in te])))
    for C in [1, 10, 100, 1000]:
        accs = []
        for x, xt, y, yt in X:
            clf = LogisticRegression(C=C, max_iter=2000, class_weight="balanced").fit(x, y)
            accs.append(np.mean(clf.predict(xt) == yt))
        print(ds, fname, C, " ".join(f"{a:.3f}" for a in accs), f"mean {np.mean(accs):.3f}", flush=True)
