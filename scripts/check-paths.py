#!/usr/bin/env python3
"""Every path of the repository that a doc, a comment or a script names exists.

Scans the tracked text files for names that start with one of the repository's top-level
directories (src/, recipes/, docs/, ...) and fails, listing each one and who names it, when one
names nothing: a file that was renamed or removed and a doc or comment that still sends readers
there. A name also counts when it is a program or module named by its file's stem (bench/cache
for bench/cache.py, examples/metrics_service for its .cpp). Generated outputs (bench/results/,
the build trees) and patterns (*, <...>, {...}, $VAR) are not checked.

    scripts/check-paths.py [REPOSITORY]      (ctest runs it: "docs: every path ...")
"""
import os
import re
import subprocess
import sys

TOPS = ("src", "recipes", "include", "tests", "integration", "docs", "bench", "scripts", "tools",
        "testkit", "examples", "cmake", "docker", ".ci")
TEXT = re.compile(r"(\.(md|hpp|cpp|h|sh|py|java|txt|cmake|json|in|yml|yaml)$|CMakeLists\.txt$|^\.ci/run$)")
NAME = re.compile(r"(?<![\w./-])((?:%s)/[\w./+-]*[\w+-])" % "|".join(re.escape(t) for t in TOPS))
STEMS = (".cpp", ".hpp", ".py", ".sh", ".md", ".java")
GENERATED = ("bench/results/",)


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    missing = {}
    for f in files:
        if not TEXT.search(f):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as text:
                body = text.read()
        except (OSError, UnicodeDecodeError):
            continue
        for m in NAME.finditer(body):
            name = m.group(1).rstrip(".")
            if any(c in name for c in "*<>{}$") or name.startswith(GENERATED):
                continue
            candidates = [os.path.join(root, name), os.path.join(root, os.path.dirname(f), name)]
            candidates += [c + ext for c in candidates[:1] for ext in STEMS]
            if not any(os.path.exists(c) for c in candidates):
                missing.setdefault(name, set()).add(f)
    if missing:
        print("check-paths: these paths name nothing in the repository:")
        for name, where in sorted(missing.items()):
            print("  %s  (named in %s)" % (name, ", ".join(sorted(where))))
        return 1
    print("check-paths: every path named exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
