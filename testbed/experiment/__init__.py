"""The studies: every experiment cosched runs, live or simulated, one way (docs/experiments.md).

protocol.py says what a study is, registry.py lists the kinds, pipeline.py runs a spec and
writes results.json (results.py) and the report from it; fields.py is the one typed spec
reader, claims.py the verdict rules, ledger.py docs/reproduction.md, quotes.py the check
that docs quote only what results hold. harness/ is the live studies' shared harness; each
study is one subpackage (paired/, pairedsim/, simvslive/, cdc/, rajaei/, dhc/); execmodel/
is `cosched calibrate`.
"""
