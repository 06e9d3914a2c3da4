#!/usr/bin/env bash
# Topologies come up as described in the state file, every plane answers over
# IPv4 and IPv6, and teardown (normal, and after a crash that lost the state
# file) leaves no namespace, interface, pin or process behind.
. "$(dirname "$0")/lib.sh"
t_require ping

leftovers() { # RUN -> what is left of a run, empty when clean
	local run=$1
	ip netns list | grep -- "-$run-" || true
	ip -o link show | grep -- "$run" || true
	ls "$FABRIC_BPFFS/mrc-fabric/$run" 2>/dev/null || true
	ls "$FABRIC_ROOT/$run" 2>/dev/null || true
}

check_names() { # every namespace and interface carries the run id; ifnames fit IFNAMSIZ
	local bad
	bad=$(jq -r --arg r "$R" '(.namespaces[].ns, .links[].a.ifname, .links[].b.ifname,
		(.links[].wire // empty | .a, .b)) | select((contains($r) | not) or ((startswith("mrcf-") | not) and length > 15))' "$ST")
	[ -z "$bad" ] || { echo "bad names: $bad"; return 1; }
}

ping_all() { # every host pair, every plane, v4 and v6 (one echo each)
	local a b p fam dst n=0
	for a in $(jq -r '.hosts | keys[]' "$ST"); do
		for b in $(jq -r '.hosts | keys[]' "$ST"); do
			[ "$a" = "$b" ] && continue
			for ((p = 0; p < $(jq .planes "$ST"); p++)); do
				for fam in ipv4 ipv6; do
					dst=$(t_port "$b" $p $fam)
					ip netns exec "$(t_ns "$a")" ping -c 1 -W 2 -q "$dst" >/dev/null || { echo "no answer $a -> $b $dst"; return 1; }
					n=$((n + 1))
				done
			done
		done
	done
	echo "$n pings answered"
}

# --- direct ---------------------------------------------------------------
t_up direct planes=4 mtu=3500
t_eq "direct: namespaces (A, B, wire)" "$(jq '.namespaces | length' "$ST")" 3
t_eq "direct: links" "$(jq '.links | length' "$ST")" 4
t_eq "direct: plane 2 address of A" "$(t_port A 2 ipv4)/$(t_port A 2 prefix4)" "198.18.2.1/24"
t_eq "direct: plane 3 IPv6 of B" "$(t_port B 3 ipv6)" "fd00:0:0:3::2"
t_eq "direct: MTU" "$(ip -n "$(t_ns A)" -j link show dev "$(t_port A 1 ifname)" | jq '.[0].mtu')" 3500
t_check "direct: names carry the run id and fit 15 chars" check_names
t_check "direct: static neighbour of B on A's plane 1" \
	bash -c "ip -n $(t_ns A) neigh show 198.18.1.2 | grep -q 'PERMANENT'"
t_check "direct: reachability on every plane" ping_all
t_check "direct: fabric.sh show" bash -c "'$T_DIR/../fabric.sh' show $R | grep -q 'p3 plane 3'"
run1=$R
fabric_down "$R"
t_eq "direct: nothing left after down" "$(leftovers "$run1")" ""

# --- clos -----------------------------------------------------------------
t_up clos planes=2 leaves=2 spines=2 hosts=3
t_eq "clos: namespaces (3 hosts + 2x(2 leaves + 2 spines))" "$(jq '.namespaces | length' "$ST")" 11
t_eq "clos: links (3 host links + 4 leaf-spine per plane)" "$(jq '.links | length' "$ST")" 14
t_eq "clos: host C hangs off leaf 0 (host index 2 % 2 leaves)" \
	"$(jq -r '.links[] | select(.name == "p1-c") | .b.node' "$ST")" "p1l0"
t_eq "clos: leaf multipath hash policy" \
	"$(ip netns exec "$(fabric_ns "$R" p0l0)" sysctl -n net.ipv4.fib_multipath_hash_policy net.ipv6.fib_multipath_hash_policy | tr '\n' ' ')" "1 1 "
t_eq "clos: leaf ECMP route has one nexthop per spine" \
	"$(ip -n "$(fabric_ns "$R" p0l0)" route show 198.18.0.0/24 | grep -c nexthop)" 2
t_check "clos: names carry the run id and fit 15 chars" check_names
t_check "clos: reachability on every plane" ping_all
run2=$R

# --- crash: state lost, a process left in a namespace, a fault pinned ------
MRC_FAULT=$B_FAULT fabric_fault "$R" set p0-l0-s0 --loss 1% >/dev/null
nsa=$(t_ns A)
ip netns exec "$nsa" sleep 300 &
sleeper=$!
T_PIDS+=("$sleeper")
for _ in $(seq 100); do [ -n "$(ip netns pids "$nsa")" ] && break; sleep 0.02; done
t_check "crash: a process runs in host A's namespace" test -n "$(ip netns pids "$nsa")"
t_check "clos: fault pins exist" test -d "$FABRIC_BPFFS/mrc-fabric/$run2"
rm -rf "${FABRIC_ROOT:?}/$run2"  # the crash lost the state directory
"$T_DIR/../fabric.sh" down "$run2"
t_eq "crash: nothing left after 'fabric.sh down RUN'" "$(leftovers "$run2")" ""
t_check "crash: the process left in a namespace is gone" bash -c "! kill -0 $sleeper 2>/dev/null"

# --- errors ---------------------------------------------------------------
t_check "bad parameter is refused" bash -c "! '$T_DIR/../fabric.sh' up direct planes=x 2>/dev/null"
t_check "bad topology file line is named" bash -c \
	"printf 'topology direct\nbogus=1\n' > $T_TMP/t.topo; '$T_DIR/../fabric.sh' up --file $T_TMP/t.topo 2>&1 | grep -q 't.topo:2'"
t_done
