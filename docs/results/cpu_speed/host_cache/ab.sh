#!/usr/bin/env bash
# A/B of the host block cache: base (HEAD before) vs new, huge pages 0/1, alternating.
# usage: ab.sh REPS OUTDIR
reps=$1; out=$2; mkdir -p $out
B=/work/wt/base/build/apps/tandem; N=/work/main/build/apps/tandem
cd /work/main
declare -A CFG
CFG[bag]="--config configs/fortunes_ngrams.yaml --warmup 5 --steps 50 --rounds 2"
CFG[demo]="--config configs/fortunes_demo.yaml --warmup 5 --steps 30 --rounds 2"
CFG[ag1]="--config configs/ag_news_small.yaml --set per_device_train_batch_size=32 --synthetic --warmup 3 --steps 10 --rounds 2"
CFG[ag2]="--config configs/ag_news_small.yaml --set per_device_train_batch_size=32 --synthetic --warmup 3 --steps 10 --rounds 2 --nproc 2"
for r in $(seq 1 $reps); do
  for c in bag demo ag1 ag2; do
    for v in base:0 new:0 base:1 new:1; do
      b=${v%:*}; hp=${v#*:}; T=$B; [ $b = new ] && T=$N
      f=$out/$c.$b.hp$hp.r$r.log
      TANDEM_HOST_HUGE_PAGES=$hp /usr/bin/time -f "wall %e user %U sys %S maxrss_kb %M minflt %R" $T bench step ${CFG[$c]} --precisions fp32 --out $out/json.$c.$b.$hp.$r > $f 2>&1
      echo "$c $b hp$hp r$r $(grep -E '^ +fp32' $f | awk '{print "sps",$2,"step",$3,"fwd",$5,"bwd",$6,"opt",$7}') $(grep wall $f)"
    done
  done
done
