#!/usr/bin/env bash
# prepare.sh — run HERE (where apt works), in the checkout the GPU session sends, before
# issue 24's device calls (docs/GPU_FIRST_RUN.md). It costs no device time and:
#   1. fills the git-ignored .deb/ with the Debian packages the build needs and the GPU
#      image may lack (the libraries' -dev packages and their runtime packages, and
#      pkgconf in case the image has no pkg-config), downloaded with apt-get download
#      (never installed), and removes what an older bench/gpu_check.sh unpacked into .deb/root;
#   2. copies the Llama-3 tokenizer (../shared/tokenizers/llama-3-8b) to .peers/tok, which the
#      EAGLE-3 benchmark's random 8B-shape target needs (../shared does not travel);
#   3. proves the .deb files alone satisfy the build's pkg-config checks: unpacks them into a
#      scratch folder and asks pkg-config with the system's folders hidden (PKG_CONFIG_LIBDIR),
#      and runs the unpacked pkgconf;
#   4. checks both folders are ignored by git, adds up what a call carries (tracked files,
#      untracked files git does not ignore, .deb, .peers/tok) against the 64 MiB limit, and
#      prints the exact `run` calls of run 1 and run 2.
# Usage: bash tools/gpu/prepare.sh [--no-download]   (--no-download: checks and prints only)
# Exit status 0 when everything above holds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
shared=${SPECDEC_SHARED_DIR:-$root/../shared}
# The packages of ../shared/gpu/first_call.sh's header, plus pkgconf (pkg-config itself).
PKGS="libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
      libutf8proc-dev libutf8proc2 libmicrohttpd-dev libmicrohttpd12 pkgconf pkgconf-bin libpkgconf3"
LIMIT_MIB=64
WARN_MIB=48
fail() { echo "prepare: FAIL: $*" >&2; exit 1; }

# ---- 1. .deb -------------------------------------------------------------------------------
if [ "${1:-}" != --no-download ]; then
  mkdir -p .deb
  rm -rf .deb/root
  rm -f .deb/*.deb
  # shellcheck disable=SC2086
  (cd .deb && apt-get download $PKGS) || fail "apt-get download (try: apt-get update)"
fi
for p in $PKGS; do compgen -G ".deb/${p}_*.deb" >/dev/null || fail ".deb/ lacks $p"; done
for p in $PKGS; do
  [ "$(compgen -G ".deb/${p}_*.deb" | wc -l)" = 1 ] || fail ".deb/ holds two versions of $p: run without --no-download"
done

# ---- 2. the tokenizer ------------------------------------------------------------------------
if [ -f "$shared/tokenizers/llama-3-8b/tokenizer.json" ]; then
  mkdir -p .peers/tok
  cp "$shared"/tokenizers/llama-3-8b/tokenizer*.json .peers/tok/
fi
[ -f .peers/tok/tokenizer.json ] || fail ".peers/tok/tokenizer.json missing (no $shared/tokenizers/llama-3-8b)"

# ---- 3. the .deb files alone satisfy the build ---------------------------------------------------
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for f in .deb/*.deb; do dpkg -x "$f" "$scratch"; done
for pc in "$scratch"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$scratch"/usr/share/pkgconfig/*.pc; do
  [ -f "$pc" ] && sed -i -E "s#^([A-Za-z_]+=)/usr#\1$scratch/usr#" "$pc"
done
pcbin=$scratch/usr/bin/pkg-config
[ -x "$pcbin" ] || pcbin=$scratch/usr/bin/pkgconf
[ -x "$pcbin" ] || fail "no pkg-config in the unpacked pkgconf"
export LD_LIBRARY_PATH=$scratch/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$pcbin" --version >/dev/null || fail "the unpacked pkgconf does not run"
for m in libcjson libpcre2-8 libutf8proc; do
  PKG_CONFIG_LIBDIR=$scratch/usr/lib/x86_64-linux-gnu/pkgconfig:$scratch/usr/share/pkgconfig \
    "$pcbin" --exists --print-errors "$m" || fail "$m not satisfied by .deb/ alone"
  lib=$(PKG_CONFIG_LIBDIR=$scratch/usr/lib/x86_64-linux-gnu/pkgconfig "$pcbin" --libs-only-l "$m" | awk '{print $1}')
  [ -e "$scratch/usr/lib/x86_64-linux-gnu/lib${lib#-l}.so" ] || fail "$m: lib${lib#-l}.so not in .deb/"
done
echo "prepare: .deb/ alone satisfies libcjson libpcre2-8 libutf8proc (pkgconf $("$pcbin" --version))"

# ---- 4. ignored, and the size of what travels ----------------------------------------------------
git check-ignore -q .deb/x.deb || fail ".deb/ is not ignored by git (.gitignore)"
git check-ignore -q .peers/tok/tokenizer.json || fail ".peers/ is not ignored by git (.gitignore)"
tracked=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
carried=$(du -sb .deb/*.deb .peers/tok | awk '{s+=$1} END {print s+0}')
shared_in=0
[ -d shared ] && shared_in=$(du -sb shared | cut -f1)
total=$(( tracked + carried + shared_in ))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
echo "prepare: travels: tree $(mib "$tracked") MiB + carried $(mib "$carried") MiB (.deb $(du -sh .deb | cut -f1), .peers/tok $(du -sh .peers/tok | cut -f1)) + shared/ $(mib "$shared_in") MiB = $(mib "$total") MiB of $LIMIT_MIB"
[ "$total" -lt $(( WARN_MIB << 20 )) ] || fail "$(mib "$total") MiB would travel: keep it under $WARN_MIB MiB (limit $LIMIT_MIB)"

commit=$(git rev-parse --short HEAD)$([ -n "$(git status --porcelain --untracked-files=no)" ] && echo +changes)
cmd1="SPECDEC_COMMIT=$commit bash tools/gpu/issue24_run1.sh"
cmd2='bash tools/gpu/issue24_run2.sh'
cat <<EOF

The device calls (docs/GPU_FIRST_RUN.md "The 15-minute plan"):
  run 1:  run(command="$cmd1", carry=[".deb", ".peers/tok"], timeout_s=580)
  run 2, within 30 s of run 1's reply (the machine is warm that long), if run 1 built and the
  reply's lease.budget_left_s (B) is at least 100:
          run(command="CALL_BUDGET_S=<B - 50> $cmd2", carry=[".deb", ".peers/tok"], timeout_s=<B - 30>)
  then give_back() at once (idle time counts).
EOF
