"""The catalog: meta records of stored data, precedence-ordered retention rules written in an
expression language, the Spark data retention job that logically deletes what has expired, period
by period with trackers, and the purge that later removes the data (Stroom's model).

Modules: fields.py (what an expression can test), expressions/ (AST, parsers, compilers),
records.py / record_store.py / dictionaries.py / importer.py / generate.py (records in and out),
ages.py / rules.py / rules_store.py / periods.py (rules and the pure period algorithm),
source.py / writeback.py / job.py / impact.py / explain.py (the Spark job and its previews),
purge.py / purge_plan.py, locations.py / location_rules.py (where a record's data may live,
checked at add, import, generate and purge), and api.py (`client.catalog`).
"""
