"""The paper's claims as comparison rows, one module per part of the paper.

Each module builds the rows its notebook writes (:func:`vrex_lib.report.row` / :func:`~vrex_lib.report.info_row`):
which reproduced number is held against which registered paper value, and, for every row that can FAIL or is NOT
RUN, its cause (:data:`vrex_lib.report.CAUSES`). A notebook cell is then "get rows, write table, plot". The
performance claims (Fig. 4, Fig. 13-18) are :mod:`.performance`, their causes :mod:`.causes`.
"""
