"""``fabula repro``: a paper's experiment grid written through ``fabula batch``, judged, and
reported as the paper's tables.

``grid`` reads and checks a grid file; ``cells`` turns its cells into batches on disk;
``judging`` judges the stories and reads them back as rows; ``tables`` renders the papers'
tables; ``run`` ties the steps together; ``estimate`` (with ``simulated``) prices a grid
before anything runs. It sits above the batch and the evaluation and imports pipelines only
through the registry.
"""
