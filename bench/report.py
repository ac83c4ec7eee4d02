"""docs/benchmarks.md is a report written by hand around tables the tools
generate. Each generated table sits between two markers,

    <!-- bench:NAME -->
    ...
    <!-- /bench:NAME -->

and a tool that measured scenario NAME replaces only what is between them,
so `make bench` refreshes the report's tables in place and leaves its prose
alone. A table whose markers are missing is appended at the end under a
heading of its own, for a writer to move where it belongs."""
import re


def block(name, text):
    """`text` between NAME's markers."""
    return f"<!-- bench:{name} -->\n{text.rstrip()}\n<!-- /bench:{name} -->"


def update(doc, tables):
    """Replaces each NAME's block of `doc` (a path) by tables[NAME];
    returns the names that had no block and were appended."""
    with open(doc) as f:
        text = f.read()
    appended = []
    for name, table in tables.items():
        pat = re.compile(rf"<!-- bench:{re.escape(name)} -->\n.*?<!-- /bench:{re.escape(name)} -->", re.S)
        new = block(name, table)
        if pat.search(text):
            text = pat.sub(lambda _m: new, text, count=1)
        else:
            text = text.rstrip() + f"\n\n## {name} (new: move this section where it belongs)\n\n{new}\n"
            appended.append(name)
    with open(doc, "w") as f:
        f.write(text)
    return appended
