"""The live view of a group in the browser: ``zkconsumer watch`` and ``zkconsumer lab --ui`` (snapshot.py: the data
the page draws; the sources fill it; the server sends it as server-sent events)."""
