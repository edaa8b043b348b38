#!/bin/sh
# enable-v2-controllers.sh - FOR THROWAWAY TEST MACHINES ONLY.
#
# On a hybrid cgroup setup (cgroup v1 hierarchies under /sys/fs/cgroup/<controller>, cgroup2 at
# /sys/fs/cgroup/unified), moves the v1 memory and pids controllers to the unified (v2) hierarchy
# when they are unused, so that sandbox/cgroup's TestCgroupV2 can run. A controller moves to v2
# when its v1 hierarchy is destroyed, which happens when its last mount goes away and it has no
# child cgroups. For each controller this script:
#   - does nothing if the controller is already listed in <cgroup2 mount>/cgroup.controllers;
#   - refuses if its v1 hierarchy has child cgroups (/proc/cgroups num_cgroups > 1: something,
#     e.g. the VM's agent, uses it) or is shared with other controllers (cpu,cpuacct);
#   - otherwise unmounts its v1 mount points and waits for it to appear in cgroup.controllers.
# It never touches other controllers. Run as root. Exit status 1 if a controller is still not on v2.
#
# To undo for pids (memory alike), once no v2 group enables it:
#   echo -pids > /sys/fs/cgroup/unified/cgroup.subtree_control   (and in every group that enabled it)
#   mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids
#
# To then run the tests as uid 10001 in a delegated group (U is the cgroup2 mount; the parent must
# enable the controllers for the group, and only the files of the kernel's delegation model are
# handed over):
#   U=/sys/fs/cgroup/unified; go test -c -o /tmp/cgroup.test ./sandbox/cgroup
#   echo "+memory +pids" > $U/cgroup.subtree_control; mkdir $U/deleg
#   chown 10001:10001 $U/deleg $U/deleg/cgroup.procs $U/deleg/cgroup.threads $U/deleg/cgroup.subtree_control
#   sh -c "echo \$\$ > $U/deleg/cgroup.procs && exec setpriv --reuid=10001 --regid=10001 --clear-groups \
#       /tmp/cgroup.test -test.run CgroupV2 -test.v"
# and like a Kubernetes container (own cgroup namespace, cgroup2 on /sys/fs/cgroup):
#   mkdir $U/pod; chown 10001:10001 $U/pod $U/pod/cgroup.procs $U/pod/cgroup.threads $U/pod/cgroup.subtree_control
#   sh -c "echo \$\$ > $U/pod/cgroup.procs && exec unshare -C -m sh -c 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && \
#       exec setpriv --reuid=10001 --regid=10001 --clear-groups /tmp/cgroup.test -test.run CgroupV2 -test.v'"
#
# Usage: enable-v2-controllers.sh [controller...]    (default: memory pids)
set -u

controllers=${*:-memory pids}
unified=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
if [ -z "$unified" ]; then
	echo "no cgroup2 filesystem is mounted; mount one first, e.g.:" >&2
	echo "  mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none /sys/fs/cgroup/unified" >&2
	exit 1
fi
echo "cgroup2 mount: $unified (controllers: $(cat "$unified/cgroup.controllers"))"

status=0
for c in $controllers; do
	if grep -qw "$c" "$unified/cgroup.controllers"; then
		echo "$c: already on cgroup v2"
		continue
	fi
	# Mount points of the v1 hierarchy holding $c, and the controllers it holds.
	points=$(awk -v c="$c" '{ for (i = 7; i <= NF && $i != "-"; i++); if ($(i+1) == "cgroup") { n = split($(i+3), o, ","); for (j = 1; j <= n; j++) if (o[j] == c) print $5 } }' /proc/self/mountinfo)
	ncg=$(awk -v c="$c" '$1 == c { print $3 }' /proc/cgroups)
	if [ -z "$ncg" ]; then
		echo "$c: not in /proc/cgroups: kernel without this controller" >&2
		status=1
		continue
	fi
	if [ "$ncg" -gt 1 ]; then
		echo "$c: its v1 hierarchy has $ncg cgroups (in use: leaving it alone):" >&2
		for p in $points; do find "$p" -mindepth 1 -type d | head -5 >&2; done
		status=1
		continue
	fi
	shared=
	for p in $points; do
		opts=$(awk -v p="$p" '$5 == p { for (i = 7; i <= NF && $i != "-"; i++); print $(i+3) }' /proc/self/mountinfo)
		for o in $(echo "$opts" | tr , ' '); do
			case $o in rw | ro | "$c" | *=*) ;; *) shared="$shared $o" ;; esac
		done
	done
	if [ -n "$shared" ]; then
		echo "$c: its v1 hierarchy also holds$shared: leaving it alone" >&2
		status=1
		continue
	fi
	for p in $points; do
		echo "$c: umount $p"
		umount "$p" || status=1
	done
	i=0
	while ! grep -qw "$c" "$unified/cgroup.controllers" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if grep -qw "$c" "$unified/cgroup.controllers"; then
		echo "$c: now on cgroup v2"
	else
		echo "$c: still not in $unified/cgroup.controllers (mounted in another mount namespace?)" >&2
		status=1
	fi
done
echo "cgroup2 controllers: $(cat "$unified/cgroup.controllers")"
exit $status
