#!/usr/bin/env python3
"""check_docs.py - the man pages render cleanly and README's commands are the ones CI runs.

    tests/docs/check_docs.py SOURCE_DIR [man|readme]...

ctest's `docs` test. Each defect found is printed as FILE:LINE: what; exit 1 if any, 0 if none,
77 (skipped, with the reason on stdout) when groff is missing for the man checks.

Man pages (man/*.1, man/*.5), the classes of defect seen in them:
  - groff -ww warnings;
  - a control character in the source (a "\\f" written through a string that turned it into a form
    feed rendered "node_recompute<FF>R");
  - an identifier glued to a font letter in the rendered text ("xR", "xfB": a font escape gone
    wrong);
  - a macro's quoted arguments (`", "`, `" ("`) on a text line, where groff prints the quotes;
  - a text line that changes font (\\fB, \\fI) more often than it changes back (\\fR, \\fP);
  - an unterminated quoted argument of a macro;
  - an option (-x, --name) rendered in italic, where it should be bold, or hyphenated at a line's end;
  - trailing whitespace.
README (README.md against .ci/run):
  - the quick start's apt-get installs exactly the packages .ci/run installs, less the ones only the
    fuzzing build uses (CI_ONLY below), and npm-installs the same onnxruntime-node;
  - no build command without a job limit (`-j` or `--parallel` alone: load 15 on 2 cores).
"""
import os
import re
import shutil
import subprocess
import sys

# .ci/run installs these for its libFuzzer build (clang), which README does not describe
CI_ONLY = {"clang", "libclang-rt-14-dev"}

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def render(page, *args):
    return subprocess.run(["groff", "-man", "-Tutf8", *args, page], capture_output=True, text=True,
                          env=dict(os.environ, LC_ALL="C.UTF-8"))


def decode_overstrike(line):
    """grotty -c's old-style overstrike into (text, fonts): '_\\bx' italic, 'x\\bx' bold."""
    text, fonts, i = [], [], 0
    while i < len(line):
        if i + 2 < len(line) and line[i + 1] == "\b":
            a, b = line[i], line[i + 2]
            font = "B" if a == b else "I" if a == "_" else "R"
            i += 3
            while i + 1 < len(line) and line[i] == "\b":  # bold italic: more strikes
                font, i = "B", i + 2
            text.append(b)
            fonts.append(font)
        else:
            text.append(line[i])
            fonts.append("R")
            i += 1
    return "".join(text), "".join(fonts)


def macro_args_unterminated(args):
    """True when a request line's arguments leave a quote open (groff reads to the line's end)."""
    i, n = 0, len(args)
    while i < n:
        while i < n and args[i] == " ":
            i += 1
        if i < n and args[i] == '"':
            i += 1
            while True:
                if i >= n:
                    return True
                if args[i] == '"':
                    if i + 1 < n and args[i + 1] == '"':
                        i += 2
                        continue
                    i += 1
                    break
                i += 1
        else:
            while i < n and args[i] != " ":
                i += 1
    return False


def check_source(page):
    with open(page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    in_code = False
    for no, line in enumerate(lines, 1):
        where = f"{page}:{no}"
        if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line):
            problem(where, f"a control character in the source: {line!r}")
        if line != line.rstrip():
            problem(where, "trailing whitespace")
        if re.match(r"\.(nf|EX)\b", line):
            in_code = True
        elif re.match(r"\.(fi|EE)\b", line):
            in_code = False
        if line.startswith((".", "'")):
            m = re.match(r"[.'](\S+)\s*(.*)", line)
            if m and not m.group(1).startswith("\\\"") and macro_args_unterminated(m.group(2)):
                problem(where, f"unterminated quoted argument: {line}")
            continue
        if in_code:
            continue
        if re.search(r'"[ ,;:()]+"', line):
            problem(where, f"a macro's quoted arguments on a text line (groff prints the quotes): {line}")
        opened = len(re.findall(r"\\f[BI]|\\f\(BI", line))
        closed = len(re.findall(r"\\f[RP]", line))
        if opened > closed:
            problem(where, f"\\f changes the font {opened} times and changes it back {closed}: {line}")


def check_rendered(page):
    r = render(page, "-ww", "-z")
    for w in (r.stdout + r.stderr).strip().splitlines():
        problem(page, f"groff -ww: {w}")
    out = render(page, "-P-c").stdout
    for no, raw in enumerate(out.split("\n"), 1):
        text, fonts = decode_overstrike(raw)
        where = f"{page} (rendered line {no})"
        # an identifier glued to a font letter; units (KiB, kB) are words of their own
        for m in re.finditer(r"[a-z0-9_]{2}[RBI]\b", text):
            if not re.search(r"(?:\b|\d)(?:[KMGTPE]i|k)B$", text[:m.end()]):
                problem(where, f"'{m.group()}': a font letter glued to a word: {text.strip()}")
        if re.search(r"(^|\s)--?[\w\-]*‐$", text):
            problem(where, f"an option hyphenated at the line's end (it is copied from here): {text.strip()}")
        for m in re.finditer(r"(?<![\w\-‐])--?[a-z][\w\-]*", text):
            if "I" in fonts[m.start():m.end()]:
                problem(where, f"option '{m.group()}' rendered in italic: {text.strip()}")


def apt_packages(text):
    """The packages of every `apt-get install` in a shell text (continuation lines joined)."""
    text = text.replace("\\\n", " ")
    pkgs = set()
    for m in re.finditer(r"apt-get install ([^\n&|;>]*)", text):
        pkgs.update(w for w in m.group(1).split() if not w.startswith(("-", "$")))
    return pkgs


def check_readme(src):
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(src, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    if not blocks:
        problem("README.md", "no ```sh block: where is the quick start?")
        return
    first = blocks[0]
    got, want = apt_packages(first), apt_packages(ci) - CI_ONLY
    if not got:
        problem("README.md", "the quick start's first command installs no package")
    for p in sorted(want - got):
        problem("README.md", f"the quick start does not install {p}, which .ci/run installs for the build or tests")
    for p in sorted(got - want):
        problem("README.md", f"the quick start installs {p}, which .ci/run does not")
    ort = re.findall(r"onnxruntime-node@[\w.]+", ci)
    for o in ort:
        if not re.search(r"npm install [^\n]*" + re.escape(o), first):
            problem("README.md", f"the quick start does not npm install {o}, as .ci/run does")
    docs = [("README.md", readme), (".ci/run", ci)]
    for d in ("man", os.path.join("tests", "bench")):
        for name in sorted(os.listdir(os.path.join(src, d))):
            if name.endswith((".1", ".5", ".sh", ".md")):
                with open(os.path.join(src, d, name), encoding="utf-8") as f:
                    docs.append((os.path.join(d, name), f.read()))
    for name, text in docs:
        for no, line in enumerate(text.split("\n"), 1):
            if re.search(r"(cmake --build|make|ninja)\b[^\n]*?(\s-j|\s--parallel)(?=[\s;&|)`]|$)", line):
                problem(f"{name}:{no}", f"a build without a job limit (use -j\"$(nproc)\" or -j2): {line.strip()}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src, what = sys.argv[1], sys.argv[2:] or ["man", "readme"]
    if "man" in what:
        if not shutil.which("groff"):
            print("skipped: groff is not installed (apt-get install groff-base)")
            sys.exit(77)
        mandir = os.path.join(src, "man")
        for name in sorted(os.listdir(mandir)):
            if re.search(r"\.[15]$", name):
                page = os.path.join(mandir, name)
                check_source(page)
                check_rendered(page)
    if "readme" in what:
        check_readme(src)
    for p in problems:
        print(p)
    print(f"check_docs.py: {len(problems)} problem(s) in {', '.join(what)}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
