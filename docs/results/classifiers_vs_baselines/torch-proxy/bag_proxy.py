# Exploration for docs/results/classifiers_vs_baselines.md (2026-11-25, evening): a PyTorch copy of the bag
# model (EmbeddingBag over scikit-learn char_wb 2-5-gram vocabularies, so no hashing and test n-grams unseen in
# training are dropped; AdamW, linear schedule, 5% warm-up, clip 1, balanced class weights, batch 16), to rank
# hypotheses cheaply before running Tandem. Needs the splits written by dump_splits.py under /tmp/bagfit/.
# Usage: /opt/torchvenv/bin/python bag_proxy.py debian-sections '{"wd": 0.01}' ...  (one line per spec).
# Not part of the build or CI.
import sys, numpy as np, torch, itertools, json
torch.set_num_threads(1)
def load(ds, seed, an):
    z = np.load(f"/tmp/bagfit/{ds}_{seed}.npz")
    def part(p):
        return (torch.tensor(z[f"{an}_{p}_indptr"]), torch.tensor(z[f"{an}_{p}_indices"]).long())
    return part("tr"), part("te"), torch.tensor(z["ytr"]), torch.tensor(z["yte"]), int(z[f"{an}_V"])

def batch(indptr, indices, rows, pool, idf):
    offs, idx = [], []
    n = 0
    for r in rows:
        a, b = indptr[r].item(), indptr[r+1].item()
        offs.append(n); idx.append(indices[a:b]); n += b - a
    idx = torch.cat(idx); offs = torch.tensor(offs)
    counts = torch.tensor([indptr[r+1].item()-indptr[r].item() for r in rows]).float().clamp(min=1)
    rep = torch.repeat_interleave(counts, counts.long())
    if pool == "mean": w = 1.0 / rep
    elif pool == "sqrt": w = 1.0 / rep.sqrt()
    elif pool == "tfidf":
        w = idf[idx]; 
        seg = torch.repeat_interleave(torch.arange(len(rows)), counts.long())
        nrm = torch.zeros(len(rows)).index_add_(0, seg, w*w).sqrt()
        w = w / nrm[seg]
    return idx, offs, w

def run(ds, seed, an="char_wb", pool="mean", wd=0.0, lr=2e-2, epochs=10, bs=16, std=0.05, d=16, ls=0.0, drop=0.0, edrop=0.0, tseed=0, opt="adamw", sgdmul=1.0, loss="ce"):
    (tri, trx), (tei, tex), ytr, yte, V = load(ds, seed, an)
    C = int(max(ytr.max(), yte.max())) + 1
    n = len(ytr)
    df = torch.zeros(V).index_add_(0, trx, torch.ones(len(trx)))
    idf = torch.log((1 + n) / (1 + df)) + 1
    g = torch.Generator().manual_seed(tseed)
    E = torch.nn.EmbeddingBag(V, d, mode="sum", sparse=(opt != "adamw")); torch.nn.init.normal_(E.weight, 0, std, generator=g)
    H = torch.nn.Linear(d, C)
    cnt = torch.bincount(ytr, minlength=C).float(); cw = n / (C * cnt)
    params = [{"params": [E.weight, H.weight], "weight_decay": wd}, {"params": [H.bias], "weight_decay": 0.0}]
    if opt == "adamw": opts = [torch.optim.AdamW(params, lr=lr)]
    elif opt == "sparseadam": opts = [torch.optim.SparseAdam([E.weight], lr=lr), torch.optim.AdamW([{"params": [H.weight], "weight_decay": wd}, {"params": [H.bias], "weight_decay": 0.0}], lr=lr)]
    elif opt == "sgd": opts = [torch.optim.SGD([E.weight], lr=lr * sgdmul), torch.optim.AdamW([{"params": [H.weight], "weight_decay": wd}, {"params": [H.bias], "weight_decay": 0.0}], lr=lr)]
    steps = epochs * ((n + bs - 1) // bs); warm = int(0.05 * steps)
    f = lambda s: s / max(1, warm) if s < warm else max(0.0, (steps - s) / max(1, steps - warm))
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, f) for o in opts]
    lossf = torch.nn.CrossEntropyLoss(weight=cw, label_smoothing=ls)
    for ep in range(epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, bs):
            rows = perm[i:i+bs].tolist()
            idx, offs, w = batch(tri, trx, rows, pool, idf)
            if edrop:
                e = torch.nn.functional.dropout(E.weight[idx], edrop, True)
                seg = torch.repeat_interleave(torch.arange(len(rows)), torch.diff(torch.cat([offs, torch.tensor([len(idx)])])))
                h = torch.zeros(len(rows), d).index_add_(0, seg, e * w[:, None])
            else:
                h = E(idx, offs, per_sample_weights=w)
            if drop: h = torch.nn.functional.dropout(h, drop, True)
            z = H(h); yb = ytr[rows]
            if loss == "ce": L = lossf(z, yb)
            else:
                t = -torch.ones_like(z); t[torch.arange(len(rows)), yb] = 1
                m = torch.clamp(1 - t * z, min=0)
                L = ((m * m if loss == "sqhinge" else m).sum(1) * cw[yb]).sum() / cw[yb].sum()
            for o in opts: o.zero_grad()
            L.backward()
            if opt == "adamw": torch.nn.utils.clip_grad_norm_([E.weight, H.weight, H.bias], 1.0)
            else:
                E.weight.grad = E.weight.grad.coalesce()
                tot = (E.weight.grad.values().norm()**2 + H.weight.grad.norm()**2 + H.bias.grad.norm()**2).sqrt()
                c = min(1.0, 1.0 / (tot.item() + 1e-6))
                if c < 1.0:
                    E.weight.grad = E.weight.grad * c; H.weight.grad.mul_(c); H.bias.grad.mul_(c)
            for o in opts: o.step()
            for sc in scheds: sc.step()
    with torch.no_grad():
        idx, offs, w = batch(tei, tex, list(range(len(yte))), pool, idf)
        pred = H(E(idx, offs, per_sample_weights=w)).argmax(1)
    return (pred == yte).float().mean().item()

if __name__ == "__main__":
    ds = sys.argv[1]
    for spec in sys.argv[2:]:
        kw = json.loads(spec)
        accs = [run(ds, s, **kw) for s in (0, 1, 2)]
        print(ds, spec, " ".join(f"{a:.3f}" for a in accs), f"mean {np.mean(accs):.3f}", flush=True)
