"""Does unlabeled Debian text help? A check before building pretraining (issue #13).

LSA (TruncatedSVD, 300 components) of char_wb 2-5-gram TF-IDF fitted on 30,000 of
the 57,381 package descriptions from `apt-cache dumpavail` that are NOT in the
debian-sections data set (none of its training or test texts), appended to the
baseline SVM's features (weight 0.5 or 1, L2-normalised), LinearSVC C = 1, on
debian-sections' six test splits. Run from the repository root:

    /opt/benchvenv/bin/python docs/results/classifiers_vs_baselines/unlabeled-lsa/lsa.py 300
"""
import sys, collections, subprocess, time, numpy as np
sys.path.insert(0, "bench")
import classic_baselines as cb
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.decomposition import TruncatedSVD
from sklearn.svm import LinearSVC
from sklearn.preprocessing import normalize
from scipy.sparse import hstack, csr_matrix
data = cb.read_debian_sections(400, seed=0)
inset = set(t for t,_,_ in data)
out = subprocess.run(["apt-cache","dumpavail"],capture_output=True,text=True).stdout
unl = []
seen=set()
for para in out.split("\n\n"):
    f={};key=None
    for line in para.split("\n"):
        if line.startswith((" ","\t")) and key: f[key]+="\n"+line
        elif ":" in line: key,v=line.split(":",1); f[key]=v.strip()
    if "Description" not in f: continue
    lines=f["Description"].split("\n"); body=[l.strip() for l in lines[1:] if l.strip()!="."]
    t=(lines[0]+"\n"+"\n".join(body)).strip()
    if t in inset or t in seen: continue
    seen.add(t); unl.append(cb.one_line(t))
print("unlabeled", len(unl), flush=True)
K=int(sys.argv[1]) if len(sys.argv)>1 else 300
vec_u = TfidfVectorizer(analyzer="char_wb", ngram_range=(2,5), sublinear_tf=True, min_df=2, max_features=300000)
t0=time.time(); U = vec_u.fit_transform(unl[:30000]); svd = TruncatedSVD(K, random_state=0).fit(U); print("svd", time.time()-t0, flush=True)
for seed in range(6):
    tr, te = cb.split(data, seed)
    Xtr=[cb.one_line(t) for t,_,_ in tr]; ytr=[l for _,l,_ in tr]
    Xte=[cb.one_line(t) for t,_,_ in te]; yte=[l for _,l,_ in te]
    v = TfidfVectorizer(analyzer="char", ngram_range=(2,5), sublinear_tf=True)
    A=v.fit_transform(Xtr); B=v.transform(Xte)
    base=(LinearSVC(C=1).fit(A,ytr).predict(B)==np.array(yte)).mean()
    La=normalize(svd.transform(vec_u.transform(Xtr))); Lb=normalize(svd.transform(vec_u.transform(Xte)))
    res=[]
    for w in (0.5,1.0):
        Ca=hstack([A, csr_matrix(w*La)]).tocsr(); Cb=hstack([B, csr_matrix(w*Lb)]).tocsr()
        res.append((LinearSVC(C=1).fit(Ca,ytr).predict(Cb)==np.array(yte)).mean())
    lsa_only=(LinearSVC(C=1).fit(La,ytr).predict(Lb)==np.array(yte)).mean()
    print(seed, len(yte), "base %.3f"%base, "lsa-only %.3f"%lsa_only, " ".join("%.3f"%r for r in res), flush=True)
