#!/usr/bin/env bash
# The code's format: clang-format 14 with the project's .clang-format, on every C file of the
# repository (the files git tracks; every *.c and *.h outside build folders without git).
#
# usage: scripts/format.sh           reformat in place
#        scripts/format.sh --check   list the files that are not clean; exit 1 when any is
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
    echo "format.sh: clang-format (14) is not installed (Debian package clang-format)" >&2
    exit 2
fi
case "$("$cf" --version)" in
*"version 14."*) ;;
*) echo "format.sh: $cf is not clang-format 14: $("$cf" --version)" >&2; exit 2 ;;
esac
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -co --exclude-standard '*.c' '*.h')
else
    mapfile -t files < <(find analyzer bench capture collector examples include launcher tests \
        topology -name '*.[ch]' -not -path '*/build*' | sort)
fi
if [ "${1:-}" = --check ]; then
    bad=0
    for f in "${files[@]}"; do
        [ -f "$f" ] || continue
        if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
            echo "not formatted: $f (scripts/format.sh reformats it)"
            bad=1
        fi
    done
    [ "$bad" = 0 ] && echo "format: ${#files[@]} files clean"
    exit "$bad"
fi
"$cf" -i "${files[@]}"
