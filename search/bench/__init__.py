"""`arts bench`: every (task, method, seed) run at one evaluation budget with one model, and what they show.

`plan` turns the command line into jobs and run folders, `runner` runs them in worker processes (`worker`)
and resumes a killed bench, `results` reads each finished run from its summary and store, `metrics` holds
the aggregate statistics, and `report` with `figures` writes the tables, the summary and the pictures
(`sections` the summary's learning, credit and investigation sections, `markdown` its tables).
"""
