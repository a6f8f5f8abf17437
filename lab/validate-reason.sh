#!/usr/bin/env bash
# Why `make lab` must run the validation play (playbooks/validate.yml) again; prints nothing
# when the last one still holds: its mark build/validate/lab-validated (written by `make lab`
# after it passed) is newer than every node's start (one podman call: a node created or
# restarted since has not been validated), the validation play and the example graphs did not
# change since, and the converge just run changed and failed nothing on any host (its log, the
# first argument, ends with Ansible's recap). VALIDATE=1 in the environment asks for a
# validation in any case.
# `make converge` holds the mark aside while it runs and puts it back only when the recap says
# nothing changed or failed (--changed-hosts LOG prints the hosts where something did, or
# "no recap"), so a converge without validation after it cannot leave a stale mark.
# Usage: lab/validate-reason.sh CONVERGE_LOG | lab/validate-reason.sh --changed-hosts CONVERGE_LOG
set -euo pipefail
cd "$(dirname "$0")/.."

# The recap's lines, colours removed: "HOST : ok=N changed=N unreachable=N failed=N ...".
changed_hosts() {
  local recap
  # make lab skipped the converge (lab/converge-reason.sh): nothing changed anywhere.
  if head -n 1 "$1" | grep -q '^converge skipped:'; then return; fi
  recap=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -E '^[^ ]+ +: ok=[0-9]+ ' || true)
  [ -n "$recap" ] || { echo "no recap in $1"; return; }
  (grep -Ev ' changed=0 +unreachable=0 +failed=0 ' <<<"$recap" || true) | awk '{print $1}' | sort -u | xargs
}
if [ "${1:-}" = --changed-hosts ]; then changed_hosts "${2:?usage: --changed-hosts CONVERGE_LOG}"; exit 0; fi
log=${1:?usage: lab/validate-reason.sh CONVERGE_LOG}
stamp=build/validate/lab-validated
playbooks=collections/ansible_collections/gpulab/cluster/playbooks

[ -z "${VALIDATE:-}" ] || { echo "asked for with VALIDATE=1"; exit 0; }
[ -s "$stamp" ] && [ -s build/validate/lab-report.md ] \
  || { echo "no passed validation of this lab yet"; exit 0; }
. lab/lib.sh
lab_started_before "$stamp" || { echo "a node was created or started since the last validation"; exit 0; }
newer=$(find "$playbooks/validate.yml" "$playbooks/templates" payload/src/gpulab/examples -newer "$stamp" -print -quit)
[ -z "$newer" ] || { echo "$newer changed since the last validation"; exit 0; }
hosts=$(changed_hosts "$log")
[ -z "$hosts" ] || echo "the converge changed something on $hosts"
