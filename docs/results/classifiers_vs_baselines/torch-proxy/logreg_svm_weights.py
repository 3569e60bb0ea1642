# Exploration for docs/results/classifiers_vs_baselines.md (2026-11-25, evening); run from the repository root
# with /opt/benchvenv/bin/python (scikit-learn). Not part of the build or CI.
import sys
sys.path.insert(0, "bench")
import classic_baselines as cb
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC
import numpy as np, collections
ds = sys.argv[1]
data = cb.read_fortunes(cb.DEMO_CATEGORIES) if ds == "fortunes-demo" else cb.read_debian_sections(400, 0)
print(collections.Counter(l for _,l,_ in data))
splits = [cb.split(data, s) for s in (0,1,2)]
X = []
for tr, te in splits:
    v = TfidfVectorizer(analyzer="char_wb", ngram_range=(2,5), sublinear_tf=True)
    X.append((v.fit_transform([t for t,_,_ in tr]), v.transform([t for t,_,_ in te]), [l for _,l,_ in tr], np.array([l for _,l,_ in te])))
for name, mk in [("svm_wb_balanced", lambda: LinearSVC(C=1.0, class_weight="balanced")),
                 ("lr_C100_none", lambda: LogisticRegression(C=100, max_iter=2000))]:
    accs = []
    for x, xt, y, yt in X:
        accs.append(np.mean(mk().fit(x, y).predict(xt) == yt))
    print(ds, name, " ".join(f"{a:.3f}" for a in accs), f"mean {np.mean(accs):.3f}", flush=True)
