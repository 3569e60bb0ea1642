#!/usr/bin/env bash
# Ranks on different hosts: two network namespaces on this machine joined by
# a veth pair (10.213.0.1 and 10.213.0.2) play two hosts. A 2 x 2 ring job
# runs across them with tandem launch's multi-node options (node 0 hosts the
# store on its veth address, a shared token authenticates node 1), checking
# every collective (tests/comm/comm_worker.cc), and that the ring took shared
# memory inside each host and TCP between the two. Needs root and ip(8): exits 77
# (skipped) with the reason otherwise. Everything it creates is removed on exit.
#   netns_test.sh TANDEM_BINARY COMM_WORKER
set -u
tandem=$1
worker=$2
skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (CAP_NET_ADMIN) to create network namespaces"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"

id=$$
ns_a=tandem_a_$id
ns_b=tandem_b_$id
veth_a=tva$id
veth_b=tvb$id
cleanup() {
  rm -f "/tmp/tandem_netns_$id.a" "/tmp/tandem_netns_$id.b"
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  ip link del "$veth_a" 2>/dev/null
  true
}
trap cleanup EXIT
ip netns add "$ns_a" 2>/dev/null || skip "cannot create a network namespace (no CAP_NET_ADMIN here?)"
ip netns add "$ns_b" || exit 1
ip link add "$veth_a" type veth peer name "$veth_b" || skip "cannot create a veth pair"
ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add 10.213.0.1/24 dev "$veth_a" && ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_a" link set lo up
ip -n "$ns_b" addr add 10.213.0.2/24 dev "$veth_b" && ip -n "$ns_b" link set "$veth_b" up && ip -n "$ns_b" link set lo up
# Host B reaches host A's address only over the veth link, never loopback.
ip -n "$ns_b" route get 10.213.0.1 | grep "dev $veth_b" >/dev/null || { echo "FAIL: no route from B to A over $veth_b"; exit 1; }

export TANDEM_STORE_TOKEN="netns-$id-$RANDOM$RANDOM"
common=(--nnodes 2 --nproc-per-node 2 --master-addr 10.213.0.1 --master-port 29877 --prefix-output --timeout 150)
ip netns exec "$ns_a" "$tandem" launch "${common[@]}" --node-rank 0 -- "$worker" collectives --backend ring \
  >"/tmp/tandem_netns_$id.a" 2>&1 &
pid_a=$!
ip netns exec "$ns_b" "$tandem" launch "${common[@]}" --node-rank 1 -- "$worker" collectives --backend ring \
  >"/tmp/tandem_netns_$id.b" 2>&1 &
pid_b=$!
wait $pid_a
rc_a=$?
wait $pid_b
rc_b=$?
echo "--- host A (10.213.0.1, node 0, ranks 0-1): exit $rc_a"
cat "/tmp/tandem_netns_$id.a"
echo "--- host B (10.213.0.2, node 1, ranks 2-3): exit $rc_b"
cat "/tmp/tandem_netns_$id.b"
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { echo "FAIL"; exit 1; }
# Auto transport: shared memory inside each host, TCP between them (the
# namespaces share a kernel but not a network namespace, so not a host).
for f in a b; do
  n=$(grep -c "transport shm within hosts, tcp between" "/tmp/tandem_netns_$id.$f")
  [ "$n" = 2 ] || { echo "FAIL: host $f's ranks did not report 'shm within hosts, tcp between'"; exit 1; }
done
echo "PASS: 2 hosts x 2 ranks, every collective correct, shared memory within hosts and TCP between"
