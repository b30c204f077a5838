"""conveyor inside the web frameworks people use: FastAPI (``conveyor.integrations.fastapi``),
Django (the ``conveyor.integrations.django`` app) and Flask (``conveyor.integrations.flask``).

Each is an optional extra (``pip install 'conveyor[fastapi]'``, ``[django]``,
``[flask]``): importing one needs its framework, and conveyor itself never does."""
