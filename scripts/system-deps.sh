#!/usr/bin/env bash
# Debian packages the tests use: Chromium (placement page test), redis-server and redis-sentinel
# (shared fleet state; tests start their own servers on loopback ports), curl (README's quick
# start, run as written). Installs what is missing;
# does nothing when all are present. Called by `npm test` (pretest) and by .ci/run.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# The Sentinel failover test (test/kong/sentinel.test.ts) runs real sentinels.
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v curl >/dev/null 2>&1 || need+=(curl)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: missing ${need[*]}; install them (Debian: apt-get install ${need[*]}) and run again" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
