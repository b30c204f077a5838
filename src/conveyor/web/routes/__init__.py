"""The API's routes, one module per kind of caller: jobs (enqueue and read), work
(workers' claims and reports), admin and bulk (admin actions on a filtered selection),
ops (stats, metrics, health), whoami. The console's pages are in ``conveyor.web.console``."""
