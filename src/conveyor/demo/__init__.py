"""The demo behind ``conveyor demo``: tasks that behave like the five systems conveyor
was built for (``tasks``), the mix of jobs it enqueues (``workload``), the live view
(``progress``) and the run itself (``runner``).

Its tasks can also be run by a worker of your own, next to a running demo:
``conveyor worker --app conveyor.demo.tasks:app --db sqlite:///conveyor-demo.db``."""
