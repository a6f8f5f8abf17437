#!/usr/bin/env bash
# The site's path of molecule/site, from WORK/site, which holds the site's inventory
# (converge.yml wrote it): the collection's tarball built as `make collection` builds it, a
# requirements.yml naming it and the collections it needs (the repository's requirements.yml),
# `ansible-galaxy collection install -r requirements.yml` into WORK/collections, then
# gpulab.cluster.site, gpulab.cluster.validate and gpulab.cluster.site again, each with its log
# in WORK. Ansible runs in an environment of its own: PATH, HOME, the locale, the machine's own
# pip settings (PIP_*: how pip reaches its index here) and ANSIBLE_COLLECTIONS_PATH=WORK/collections,
# nothing else: no ansible.cfg (none in WORK/site; ANSIBLE_CONFIG unset), none of molecule's
# or the lab's plugins, role paths or settings. The second converge must change nothing.
# Each step's time goes to $GPULAB_TIMINGS_FILE when set (lab/molecule-test.sh prints them).
# Usage: molecule/site/site.sh WORK
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(cd "${1:?usage: site.sh WORK}" && pwd)
site=$work/site
bin=$(dirname "$(command -v ansible-playbook)")
case "$site/" in "$repo"/*) echo "site.sh: $site is inside the repository" >&2; exit 2 ;; esac
[ -f "$site/inventory.yml" ] || { echo "site.sh: no inventory at $site/inventory.yml" >&2; exit 2; }

say() { echo "==> [site] $*"; }
record() {  # record STEP SECONDS: a timing line for lab/molecule-test.sh
  [ -z "${GPULAB_TIMINGS_FILE:-}" ] || printf '{"step": "%s", "seconds": %s}\n' "$1" "$2" >>"$GPULAB_TIMINGS_FILE"
}
site_env=(env -i "PATH=$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$HOME"
  "LANG=C.UTF-8" "ANSIBLE_COLLECTIONS_PATH=$work/collections" "ANSIBLE_NOCOLOR=1")
while IFS='=' read -r name value; do site_env+=("$name=$value"); done < <(env | grep -E '^PIP_[A-Z_]+=' || true)
# run STEP LOG COMMAND...: in the site folder and the site's environment, its output in WORK/LOG.
run() {
  local step=$1 log=$work/$2 start=$SECONDS; shift 2
  if ! (cd "$site" && "${site_env[@]}" "$@") >"$log" 2>&1; then
    tail -n 60 "$log"
    say "$step FAILED ($log)"
    exit 1
  fi
  record "$step" $((SECONDS - start))
  say "$step: $((SECONDS - start)) s ($(grep -c . "$log") lines in $log)"
}

start=$SECONDS
GPULAB_COLLECTION_OUT=$work/dist bash "$repo/scripts/build-collection.sh"
tarball=$(echo "$work"/dist/gpulab-cluster-*.tar.gz)
record "collection tarball" $((SECONDS - start))
# The site's requirements.yml: the tarball, then the collections it needs.
{
  echo "collections:"
  echo "  - name: $tarball"
  echo "    type: file"
  sed -n '/^collections:/,$p' "$repo/requirements.yml" | tail -n +2
} >"$site/requirements.yml"
# Nothing else of the checkout: the site folder holds these two files and nothing more.
holds=$(cd "$site" && ls -A | xargs)
[ "$holds" = "inventory.yml requirements.yml" ] || { echo "site.sh: the site folder holds $holds" >&2; exit 2; }
say "$site holds $holds"

run "ansible-galaxy install" galaxy.log ansible-galaxy collection install -r requirements.yml -p "$work/collections"
run "site converge" converge.log ansible-playbook -i inventory.yml gpulab.cluster.site
run "validate" validate.log ansible-playbook -i inventory.yml gpulab.cluster.validate
run "site converge again" idempotence.log ansible-playbook -i inventory.yml gpulab.cluster.site
sed -n '/^PLAY RECAP/,$p' "$work/idempotence.log"
