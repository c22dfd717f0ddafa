#!/bin/sh
# check_words.sh — the project's text speaks of the project, not of how it was made: no "session N",
# "helper-N" or "NOT yet run" in tracked files (results files' names aside), and commit subjects since
# the rule began (FIRST, the first commit held to it) at most 72 characters with a body; and the
# library reads its environment in one place (src/core/knobs.c).
# Prints "N passed, N failed" like the other stages.
cd "$(dirname "$0")/.." || exit 1
FIRST=a143fcf
pass=0
fail=0
if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
  files=$(git ls-files | grep -v '^tests/check_words.sh$')
else
  files=$(find . -path ./.git -prune -o -path './build*' -prune -o -type f -print)
fi
# shellcheck disable=SC2086
hits=$(echo "$files" | xargs grep -nEi 'session [0-9]|sessions [0-9]|helper-[0-9]|not yet run' 2>/dev/null)
if [ -n "$hits" ]; then
  echo "words: history in the project's text (say why, cite a results file; history goes to git):"
  echo "$hits" | head -n 20
  fail=$((fail + 1))
else
  pass=$((pass + 1))
fi
# One table of settings: the library reads its environment only in src/core/knobs.c (knobs.h).
# shellcheck disable=SC2086
env_hits=$(echo "$files" | grep -E '^(\./)?src/' | grep -v 'src/core/knobs.c$' | xargs grep -nE 'getenv *\(' 2>/dev/null)
if [ -n "$env_hits" ]; then
  echo "settings: the library reads the environment only through src/core/knobs.h:"
  echo "$env_hits" | head -n 20
  fail=$((fail + 1))
else
  pass=$((pass + 1))
fi
if git cat-file -e "$FIRST^{commit}" 2>/dev/null; then
  bad=$(for c in $(git rev-list --no-merges "$FIRST^..HEAD"); do
    subj=$(git log -1 --format=%s "$c")
    [ ${#subj} -gt 72 ] && echo "$c: subject of ${#subj} characters: $subj"
    [ -z "$(git log -1 --format=%b "$c" | tr -d '[:space:]')" ] && echo "$c: no body: $subj"
  done)
  if [ -n "$bad" ]; then
    echo "commits: subjects at most 72 characters, with a body that says why:"
    echo "$bad" | head -n 20
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
else
  echo "commits: no history here (a shallow or exported tree): not checked"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
