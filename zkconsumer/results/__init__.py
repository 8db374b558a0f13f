"""Results as data (issue 55): every measured figure a document states comes from a result record in ``results/``,
and the documents' tables are rendered from those records, never typed.

- :mod:`.record`: one run's record (what ran, when, the commit, the machine, the parts' versions, a fingerprint of
  the source it measured, its figures): written by the benchmarks, read with plain Python or Spark;
- :mod:`.fingerprint`: the fingerprint of a set of source paths, git's blob hashes, so a record can tell whether
  the code it measured has changed since;
- :mod:`.blocks`: the marked blocks of a Markdown file, rendered from their records and checked against them
  (a hand edit fails the check; a record older than its code is marked, not failed);
- :mod:`.views`: how a record becomes Markdown, one named view per kind of table.
"""
