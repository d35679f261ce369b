#!/bin/sh
# The remote shell mpirun uses to start its daemon on another host, for the two-host test on
# one machine (tests/shard/workers_test.cpp): `loopback_rsh.sh [OPTIONS] HOST COMMAND...` runs
# COMMAND here. The hosts are loopback addresses (127.0.0.1, 127.0.0.2), so mpirun starts a
# daemon for the second as it would over ssh, and the ranks talk over TCP on lo.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
[ -n "${LATHE_RSH_LOG:-}" ] && echo "$1" >>"$LATHE_RSH_LOG"  # the host, for the test
shift
exec /bin/sh -c "$*"
