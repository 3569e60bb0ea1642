# Exploration for docs/results/classifiers_vs_baselines.md (2026-11-25, evening); run from the repository root
# with /opt/benchvenv/bin/python (scikit-learn). Not part of the build or CI.
import sys
sys.path.insert(0, "bench")
import classic_baselines as cb
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize
import numpy as np
ds = sys.argv[1]
data = cb.read_fortunes(cb.DEMO_CATEGORIES) if ds == "fortunes-demo" else cb.read_debian_sections(400, 0)
configs = {
 "svm_char_sub_idf_l2": dict(an="char", binary=False, sub=True, idf=True, norm="l2"),
 "svm_wb_sub_idf_l2": dict(an="char_wb", binary=False, sub=True, idf=True, norm="l2"),
 "svm_wb_bin_idf_l2": dict(an="char_wb", binary=True, sub=False, idf=True, norm="l2"),
 "svm_wb_bin_noidf_l2": dict(an="char_wb", binary=True, sub=False, idf=False, norm="l2"),
 "svm_wb_bin_noidf_l1": dict(an="char_wb", binary=True, sub=False, idf=False, norm="l1"),
}
for name, c in configs.items():
    accs = []
    for seed in [0,1,2]:
        tr, te = cb.split(data, seed)
        v = TfidfVectorizer(analyzer=c["an"], ngram_range=(2,5), binary=c["binary"], sublinear_tf=c["sub"], use_idf=c["idf"], norm=c["norm"])
        x = v.fit_transform([t for t,_,_ in tr]); xt = v.transform([t for t,_,_ in te])
        ytr = [l for _,l,_ in tr]; yte = [l for _,l,_ in te]
        clf = LinearSVC(C=1.0).fit(x, ytr)
        accs.append(np.mean(clf.predict(xt) == np.array(yte)))
    print(ds, name, " ".join(f"{a:.3f}" for a in accs), f"mean {np.mean(accs):.3f}", flush=True)
