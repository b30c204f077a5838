"""The API's routes, one module per kind of caller: jobs (enqueue and read), work
(workers' claims and reports), admin, ops (stats, metrics, health, dashboard)."""
