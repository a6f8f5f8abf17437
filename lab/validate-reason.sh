#!/usr/bin/env bash
# Why `make lab` must run the validation play (playbooks/validate.yml) again; prints nothing
# when the last one still holds: it passed (build/validate/lab-validated, written by `make lab`
# after it passed, removed by lab/up.sh and lab/down.sh whenever a node is created or
# started), the validation play and the example graphs did not change since, and the converge
# just run changed and failed nothing on any host (its log, the first argument, ends with
# Ansible's recap). VALIDATE=1 in the environment asks for a validation in any case.
# Usage: lab/validate-reason.sh CONVERGE_LOG
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:?usage: lab/validate-reason.sh CONVERGE_LOG}
stamp=build/validate/lab-validated
playbooks=collections/ansible_collections/gpulab/cluster/playbooks

[ -z "${VALIDATE:-}" ] || { echo "asked for with VALIDATE=1"; exit 0; }
[ -s "$stamp" ] && [ -s build/validate/lab-report.md ] \
  || { echo "no passed validation of this lab yet"; exit 0; }
newer=$(find "$playbooks/validate.yml" "$playbooks/templates" payload/examples -newer "$stamp" -print -quit)
[ -z "$newer" ] || { echo "$newer changed since the last validation"; exit 0; }
# The recap's lines, colours removed: "HOST : ok=N changed=N unreachable=N failed=N ...".
recap=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^[^ ]+ +: ok=[0-9]+ ' || true)
[ -n "$recap" ] || { echo "no recap in $log"; exit 0; }
hosts=$( (grep -Ev ' changed=0 +unreachable=0 +failed=0 ' <<<"$recap" | awk '{print $1}' | sort -u || true) | xargs)
[ -z "$hosts" ] || echo "the converge changed something on $hosts"
