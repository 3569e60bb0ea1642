# Exploration for docs/results/classifiers_vs_baselines.md (2026-11-25, evening); run from the repository root
# with /opt/benchvenv/bin/python (scikit-learn). Not part of the build or CI.
import sys
sys.path.insert(0, "bench")
import classic_baselines as cb
from sklearn.feature_extraction.text import CountVectorizer
import numpy as np
for ds in ["debian-sections", "fortunes-demo"]:
    data = cb.read_fortunes(cb.DEMO_CATEGORIES) if ds == "fortunes-demo" else cb.read_debian_sections(400, 0)
    labels = sorted({l for _, l, _ in data})
    for seed in [0,1,2]:
        tr, te = cb.split(data, seed)
        out = {}
        for an in ["char_wb", "char"]:
            v = CountVectorizer(analyzer=an, ngram_range=(2,5)).fit([t for t,_,_ in tr])
            for part, rows in (("tr", tr), ("te", te)):
                x = v.transform([t for t,_,_ in rows]).tocsr()
                out[f"{an}_{part}_indptr"] = x.indptr; out[f"{an}_{part}_indices"] = x.indices; out[f"{an}_{part}_data"] = x.data
            out[f"{an}_V"] = np.array(len(v.vocabulary_))
        out["ytr"] = np.array([labels.index(l) for _,l,_ in tr]); out["yte"] = np.array([labels.index(l) for _,l,_ in te])
        np.savez(f"/tmp/bagfit/{ds}_{seed}.npz", **out)
