#!/usr/bin/env python3
"""Fails when a ```cpp block of README.md is missing from the file that compiles them.

Usage: readme_snippets_check.py README.md test/unit/readme_snippets.cpp

A block matches when its lines appear consecutively in the file, each compared
without its leading and trailing blanks (the file indents them inside
functions); blank lines are ignored. Prints every block that does not match.
"""
import re
import sys


def significant_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def contains(haystack, needle):
    width = len(needle)
    return any(haystack[i:i + width] == needle for i in range(len(haystack) - width + 1))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    readme, snippets = (open(path).read() for path in sys.argv[1:])
    blocks = re.findall(r"^```cpp\n(.*?)^```", readme, re.S | re.M)
    compiled = significant_lines(snippets)
    missing = [block for block in blocks if not contains(compiled, significant_lines(block))]
    for block in missing:
        print(f"README.md block not in {sys.argv[2]}:\n{block}", file=sys.stderr)
    print(f"{len(blocks) - len(missing)} of {len(blocks)} README cpp blocks found in {sys.argv[2]}")
    if not blocks:
        sys.exit("no ```cpp block found in README.md")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
