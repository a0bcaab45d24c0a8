#!/usr/bin/env bash
# The seeds' acceptance test of `nuvec_core::fast`: generates
# crates/nuvec-core/tests/seed_fast.rs from the seeds' test file (000_*.txt) and runs it.
#
#   scripts/seed-tests.sh [--write-only] [SEEDS_DIR] [-- ARGS FOR THE TEST BINARY]
#
# With --write-only it writes the file and stops: `cargo test --workspace` then runs it with
# the other tests (CI does so, which spares a second build of the dependencies).
#
# SEEDS_DIR defaults to ../shared/seeds beside the repository. The generated file is the
# seed verbatim without its header (the lines before the first `//!`) and without its
# `#[cfg(target_os = "macos")]` lines, so that the GPU tests compile everywhere (they skip
# themselves where no GPU answers). It is ignored by git: the seeds are not ours to commit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
write_only=0
if [ "${1:-}" = "--write-only" ]; then
    write_only=1
    shift
fi
seeds="${1:-$root/../shared/seeds}"
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift

shopt -s nullglob
files=("$seeds"/000_*.txt)
if [ ${#files[@]} -ne 1 ]; then
    echo "seed-tests: expected one 000_*.txt in $seeds, found ${#files[@]}" >&2
    exit 1
fi

out="$root/crates/nuvec-core/tests/seed_fast.rs"
awk '
    !started && /^\/\/!/ { started = 1 }
    !started { next }
    /^[[:space:]]*#\[cfg\(target_os = "macos"\)\][[:space:]]*$/ { next }
    { print }
' "${files[0]}" > "$out.tmp"
if ! grep -q '^mod common;' "$out.tmp"; then
    echo "seed-tests: ${files[0]} does not look like the fast test file" >&2
    rm -f "$out.tmp"
    exit 1
fi
mv "$out.tmp" "$out"
echo "seed-tests: wrote ${out#"$root"/} from ${files[0]}"
[ "$write_only" = 1 ] && exit 0

cd "$root"
cargo test -p nuvec-core --test seed_fast -- "$@"
